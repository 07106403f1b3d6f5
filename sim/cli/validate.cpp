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
#include "sim/config/scenario.hpp"
#include "sim/core/files.hpp"
#include "sim/core/interrupt.hpp"
#include "sim/core/json_reader.hpp"
#include "sim/core/paths.hpp"

namespace dtsim::cli {

namespace fs = std::filesystem;

namespace {

struct Row {
  std::string file, name;
  config::Reference ref;
  int gpus = 0;
  double predicted_s = 0;
  std::string failure;
};

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

}  // namespace

int validate(const ValidateOptions& o) {
  if (!o.json_out.empty()) check_output_path(o.json_out);
  std::vector<Row> rows;
  const fs::path dir = o.directory.empty() ? fs::path(data_dir()) / "scenarios/validation" : fs::path(o.directory);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".json" || e.path().stem() == "base") continue;
    const config::Scenario s = config::load_scenario(e.path().string());
    if (!s.reference) continue;
    rows.push_back({e.path().string(), s.name, *s.reference, s.cluster.num_gpus(), 0, ""});
  }
  if (rows.empty()) {
    std::cerr << "error: no scenarios with a \"reference\" in " << dir.string() << "\n";
    return 2;
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.gpus < b.gpus; });

  {
    // A signal now stops the children and lets the scratch folder be removed before dtsim exits.
    interrupt::Hold hold;
    const Scratch scratch;
    const std::string self = fs::read_symlink("/proc/self/exe").string();
    std::atomic<std::size_t> next{0};
    std::vector<std::thread> pool;
    const int jobs = o.jobs > 0 ? o.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
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
  interrupt::exit_if_pending();

  double sum = 0, worst = 0;
  int failed = 0;
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  std::cout << fmt::format("{:<22} {:>6} {:>13} {:>13} {:>11} {:>11} {:>8}\n", "scenario", "GPUs", "published_s",
                           "predicted_s", "pub_TFLOPs", "pred_TFLOPs", "error");
  for (const auto& r : rows) {
    if (!r.failure.empty()) {
      ++failed;
      std::cout << fmt::format("{:<22} {:>6} failed: {}", r.name, r.gpus, r.failure);
      continue;
    }
    const double err = 100.0 * (r.predicted_s / r.ref.step_time_s - 1.0);
    const double tflops = r.ref.flops_per_step / (r.predicted_s * r.gpus) / 1e12;
    sum += std::fabs(err);
    worst = std::max(worst, std::fabs(err));
    std::cout << fmt::format("{:<22} {:>6} {:>13.2f} {:>13.2f} {:>11.1f} {:>11.1f} {:>+7.1f}%\n", r.name, r.gpus,
                             r.ref.step_time_s, r.predicted_s, r.ref.tflops_per_gpu, tflops, err);
    out.push_back({{"scenario", r.name}, {"gpus", r.gpus}, {"published_step_time_s", r.ref.step_time_s},
                   {"predicted_step_time_s", r.predicted_s}, {"error_percent", err}, {"source", r.ref.source}});
  }
  const int ok = static_cast<int>(rows.size()) - failed;
  const double mean = ok > 0 ? sum / ok : 0.0;
  std::cout << fmt::format("\nmean |error| {:.1f}%, max |error| {:.1f}% over {} rows", mean, worst, ok)
            << (failed ? fmt::format(", {} failed", failed) : "") << "\n";
  if (!o.json_out.empty())
    write_file_atomic(o.json_out, nlohmann::ordered_json{{"rows", out}, {"mean_abs_error_percent", mean},
                                                         {"max_abs_error_percent", worst}}.dump(2) + "\n");
  if (failed) return 1;
  if ((o.max_mean_error >= 0 && mean > o.max_mean_error) || (o.max_error >= 0 && worst > o.max_error)) return 3;
  return 0;
}

}  // namespace dtsim::cli
