#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <thread>

#include "sim/cli/commands.hpp"
#include "sim/cli/validate.hpp"
#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "sim/core/files.hpp"
#include "sim/core/interrupt.hpp"
#include "sim/core/json_reader.hpp"
#include "sim/core/paths.hpp"

namespace dtsim::cli {

namespace fs = std::filesystem;

namespace {

using Row = ValidationRow;

// The reading of result.json's memory that a reference's memory_reading names.
double memory_reading(const Json& memory, const std::string& reading) {
  const char* key = reading == "reserved" ? "reserved_peak_bytes" : reading == "device" ? "device_peak_bytes" : "allocated_peak_bytes";
  // Without an allocator model the allocated peak is the plan's peak.
  if (!memory.contains(key)) return memory.at("peak_bytes").get<double>();
  return memory.at(key).get<double>();
}

// Runs `dtsim run` on one scenario in a child process. SimGrid runs once per process, hence the
// child; no shell, so no scenario text is ever read as a command: an argument vector, and the
// child's output in files of the private scratch folder named from the row's index and a slug
// of its name, never the name itself.
void simulate(Row& row, std::size_t index, const std::string& self, const fs::path& scratch) {
  const std::string stem = fmt::format("{}-{}", index, slug(row.name));
  const std::string out_dir = (scratch / stem).string(), out = out_dir + ".out", err = out_dir + ".err";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  const int create = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW;
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), create, 0600);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), create, 0600);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  // "--" ends the options: a scenario file named like an option stays a file.
  std::vector<std::string> args{self, "run", "--format", "json", "-o", out_dir, "--", row.file};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = ::posix_spawn(&pid, self.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (spawned != 0) throw std::runtime_error(fmt::format("cannot start {}: {}", self, std::strerror(spawned)));
  interrupt::watch_child(pid);
  if (const int sig = interrupt::pending()) ::kill(pid, sig);  // it came before the child was watched
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  interrupt::forget_child(pid);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    row.failure = read_text_file(err);
    if (row.failure.empty())
      row.failure = WIFSIGNALED(status) ? fmt::format("ended by signal {}\n", WTERMSIG(status))
                                        : fmt::format("exit status {}\n", WEXITSTATUS(status));
    return;
  }
  const Json j = parse_json_file(out);
  row.predicted_s = j.at("step_time_s").get<double>();
  if (row.ref.peak_memory_bytes > 0) row.predicted_memory_bytes = memory_reading(j.at("memory"), row.ref.memory_reading);
}

// A private folder (mode 0700, unique name) under $TMPDIR, removed with everything in it.
class Scratch {
 public:
  Scratch() {
    std::string templ = (fs::temp_directory_path() / "dtsim-validate-XXXXXX").string();
    if (!::mkdtemp(templ.data())) throw std::runtime_error(fmt::format("cannot create {}: {}", templ, std::strerror(errno)));
    path_ = templ;
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Every scenario with a "reference" under `dir`; a suite is searched in its sub-folders too.
std::vector<Row> collect_rows(const fs::path& dir, bool recursive) {
  std::vector<Row> rows;
  std::vector<fs::path> files;
  std::error_code ec;
  auto take = [&](const fs::directory_entry& e) {
    if (e.is_regular_file() && e.path().extension() == ".json" && e.path().stem() != "base") files.push_back(e.path());
  };
  if (recursive)
    for (const auto& e : fs::recursive_directory_iterator(dir, fs::directory_options::none, ec)) take(e);
  else
    for (const auto& e : fs::directory_iterator(dir, ec)) take(e);
  std::sort(files.begin(), files.end());  // directory order is the file system's, not the user's
  for (const auto& f : files) {
    const config::Scenario s = config::load_scenario(f.string());
    if (!s.reference) continue;
    Row row;
    row.file = f.string();
    row.name = s.name;
    row.ref = *s.reference;
    row.gpus = s.cluster.num_gpus();
    if (row.ref.group.empty()) row.ref.group = f.parent_path() == dir ? dir.filename().string() : f.parent_path().filename().string();
    rows.push_back(std::move(row));
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.gpus < b.gpus; });
  return rows;
}

void simulate_all(std::vector<Row>& rows, int jobs_wanted) {
  // A signal now stops the children and lets the scratch folder be removed before dtsim exits.
  interrupt::Hold hold;
  const Scratch scratch;
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> pool;
  const int jobs = jobs_wanted > 0 ? jobs_wanted : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int j = 0; j < jobs; ++j)
    pool.emplace_back([&] {
      for (std::size_t i = next++; i < rows.size() && !interrupt::pending(); i = next++) try {
          simulate(rows[i], i, self, scratch.path());
        } catch (const std::exception& e) {
          rows[i].failure = std::string(e.what()) + "\n";
        }
    });
  for (auto& t : pool) t.join();
}

}  // namespace

int validate(const ValidateOptions& o) {
  if (!o.json_out.empty()) check_output_path(o.json_out);
  const bool suite = !o.suite.empty();
  if (suite && !o.directory.empty()) throw InputError("", "--suite", "give --suite or --dir, not both");
  const fs::path dir = suite ? fs::path(o.suite)
                             : o.directory.empty() ? fs::path(data_dir()) / "scenarios/validation" : fs::path(o.directory);
  std::vector<Row> rows = collect_rows(dir, suite);
  if (rows.empty()) {
    std::cerr << "error: no scenarios with a \"reference\" in " << dir.string() << "\n";
    return 2;
  }
  simulate_all(rows, o.jobs);
  interrupt::exit_if_pending();
  const ValidationSummary sum = report_validation(rows, o.json_out, suite);
  if (sum.failed) return 1;
  if ((o.max_mean_error >= 0 && sum.mean_abs_error > o.max_mean_error) || (o.max_error >= 0 && sum.max_abs_error > o.max_error))
    return 3;
  if (o.strict && sum.outside_tolerance > 0) return 3;
  return 0;
}

}  // namespace dtsim::cli
