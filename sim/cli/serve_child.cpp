// One simulation of `dtsim serve`: a child `dtsim run` (posix_spawn, never a shell) in a private
// temporary folder, so a request gets exactly the bytes the command line prints, a crash or a
// runaway simulation takes down only the child, and the time limit can be enforced by killing it.
#include "sim/cli/serve_child.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

extern char** environ;

namespace dtsim::cli {

namespace {

namespace fs = std::filesystem;

std::mutex g_start;  // between starting a child and stopping the server
bool g_stopping = false;
std::atomic<bool> g_stop_seen{false};
std::atomic<int> g_children{0};
std::atomic<int> g_running{0};  // requests for a child, started or about to be

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Removes the folder on every way out, error paths included.
struct Folder {
  fs::path dir;
  ~Folder() {
    std::error_code ec;
    if (!dir.empty()) fs::remove_all(dir, ec);
  }
};

// The child leads its own process group, so that killing the group also ends anything it started;
// DTSIM_SERVE_CHILD (the server's pid) makes it die with the thread that waits for it, should the
// server be killed.
pid_t spawn(const fs::path& dir, bool report) {
  const std::string exe = fs::read_symlink("/proc/self/exe").string();
  std::vector<std::string> args{exe, "run", "scenario.json", "-o", "out", "--format", "json"};
  if (report) args.emplace_back("--html");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env{"DTSIM_SERVE_CHILD=" + std::to_string(getpid())};
  for (char** e = environ; *e; ++e)
    if (std::string(*e).rfind("DTSIM_SERVE_CHILD=", 0) != 0) env.emplace_back(*e);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addchdir_np(&fa, dir.c_str());  // paths in its errors read as the CLI's
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "stdout.txt", O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 2, "stderr.txt", O_WRONLY | O_CREAT | O_TRUNC, 0600);
  // Nothing else of the server's: a socket kept open by a child would hold its port and clients.
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, exe.c_str(), &fa, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  return rc == 0 ? pid : -1;
}

// Waits for the child; past the deadline, or when the server stops, kills its whole group.
// Returns false when it was killed.
bool wait_for(pid_t pid, double limit_s, int& status) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_s);
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (g_stop_seen.load() || std::chrono::steady_clock::now() > deadline) {
      kill(-pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace

api::Answer time_limit_passed(const ServeOptions& o) {
  return api::text(504, "error: the simulation ran past the server's time limit (" + std::to_string(o.time_limit_s) +
                            " s)\n");
}

api::Answer run_child(const ServeOptions& o, const std::string& scenario, bool report) {
  // Children at once are --jobs; past it a request is refused rather than queued.
  if (g_running.fetch_add(1) >= o.jobs) {
    g_running.fetch_sub(1);
    return api::text(503, "error: " + std::to_string(o.jobs) + " simulations are running; try again\n");
  }
  struct Release {
    ~Release() { g_running.fetch_sub(1); }
  } release;
  // Declared before the folder, so that stop_children() sees the child gone only once the folder is.
  struct Count {
    bool on = false;
    ~Count() {
      if (on) g_children.fetch_sub(1);
    }
  } count;
  Folder folder;
  pid_t pid = -1;
  {
    std::lock_guard lock(g_start);
    if (g_stopping) return api::text(503, "error: the server is stopping\n");
    std::string tmpl = (fs::temp_directory_path() / "dtsim-serve-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) return api::text(500, "error: cannot make a temporary folder\n");
    folder.dir = tmpl;
    std::ofstream out(folder.dir / "scenario.json", std::ios::binary);
    out << scenario;
    out.close();
    if (!out) return api::text(500, "error: cannot write the scenario to a temporary folder\n");
    pid = spawn(folder.dir, report);
    if (pid < 0) return api::text(500, "error: cannot start dtsim run\n");
    g_children.fetch_add(1);
    count.on = true;
  }
  int status = 0;
  const bool finished = wait_for(pid, o.time_limit_s, status);
  if (!finished && g_stop_seen.load()) return api::text(503, "error: the server is stopping\n");
  if (!finished) return time_limit_passed(o);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == 0 && report) return {200, slurp(folder.dir / "out" / "report.html"), "text/html; charset=utf-8"};
  if (code == 0) return {200, slurp(folder.dir / "stdout.txt")};
  return api::text(code == 2 ? 400 : 500, slurp(folder.dir / "stderr.txt"));
}

void stop_children() {
  {
    std::lock_guard lock(g_start);
    g_stopping = true;
  }
  g_stop_seen.store(true);
  // Each waiting thread kills its child within a few milliseconds of seeing the flag.
  while (g_children.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

}  // namespace dtsim::cli
