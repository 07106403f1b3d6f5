#include "sim/realrun/netns.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <regex>
#include <stdexcept>

#include <fmt/format.h>

extern char** environ;

namespace dtsim::realrun {

int run_program(const std::vector<std::string>& argv) {
  std::vector<std::string> copy = argv;
  std::vector<char*> c;
  for (auto& a : copy) c.push_back(a.data());
  c.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);  // quiet; failures are reported by status
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, c[0], &actions, nullptr, c.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return 127;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

void enter_netns(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) close(fd);
    throw std::runtime_error("entering network namespace " + path + ": " + why);
  }
  close(fd);
}

std::vector<std::string> stale_namespaces(const std::string& folder) {
  static const std::regex pattern("dtsim-([0-9]{1,9})-(switch|[0-9]{1,3})");
  std::vector<std::string> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::smatch m;
    if (!std::regex_match(name, m, pattern)) continue;
    const auto pid = static_cast<pid_t>(std::stol(m[1].str()));
    if (pid == getpid() || kill(pid, 0) == 0 || errno != ESRCH) continue;
    out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

ShapedNetwork::ShapedNetwork(int members, double gbps) {
  const std::string ip = "/usr/sbin/ip", tc = "/usr/sbin/tc";
  // What a run killed by SIGKILL left: its namespaces, and with them its links.
  for (const auto& n : stale_namespaces("/run/netns")) (void)run_program({ip, "netns", "del", n});
  const auto pid = std::to_string(getpid());
  const std::string sw = fmt::format("dtsim-{}-switch", pid);
  auto must = [&](const std::vector<std::string>& argv) {
    if (run_program(argv) != 0) {
      std::string cmd;
      for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
      remove();
      throw std::runtime_error("setting up the shaped network failed: " + cmd);
    }
  };
  // tc's token bucket: the rate, a burst of a few milliseconds of it (at least 64 KB so that
  // TCP's segments pass), and packets queue up to 50 ms before being dropped.
  const std::string rate = fmt::format("{}kbit", static_cast<long long>(gbps * 1e6));
  const std::string burst = fmt::format("{}", std::max<long long>(65536, static_cast<long long>(gbps * 1e9 / 8 * 0.002)));
  names_.push_back(sw);
  must({ip, "netns", "add", sw});
  must({ip, "-n", sw, "link", "add", "br0", "type", "bridge"});
  must({ip, "-n", sw, "link", "set", "br0", "up"});
  for (int i = 0; i < members; ++i) {
    const std::string ns = fmt::format("dtsim-{}-{}", pid, i);
    const std::string v = fmt::format("dr{}v{}", pid, i), p = fmt::format("dr{}p{}", pid, i);  // at most 15 characters
    names_.insert(names_.end() - 1, ns);
    must({ip, "netns", "add", ns});
    // Both ends are made inside the namespaces: a SIGKILL at any point leaves no link in the
    // host's, only namespaces, which the next run removes (stale_namespaces).
    must({ip, "-n", ns, "link", "add", v, "type", "veth", "peer", "name", p, "netns", sw});
    must({ip, "-n", sw, "link", "set", p, "master", "br0"});
    must({ip, "-n", sw, "link", "set", p, "up"});
    must({ip, "-n", ns, "addr", "add", address(i) + "/24", "dev", v});
    must({ip, "-n", ns, "link", "set", v, "up"});
    must({ip, "-n", ns, "link", "set", "lo", "up"});
    must({tc, "-n", ns, "qdisc", "add", "dev", v, "root", "tbf", "rate", rate, "burst", burst, "latency", "50ms"});
    must({tc, "-n", sw, "qdisc", "add", "dev", p, "root", "tbf", "rate", rate, "burst", burst, "latency", "50ms"});
  }
}

ShapedNetwork::~ShapedNetwork() { remove(); }

void ShapedNetwork::remove() {
  // Deleting a namespace deletes its end of every veth pair, and with it the other end.
  for (const auto& n : names_) (void)run_program({"/usr/sbin/ip", "netns", "del", n});
  names_.clear();
}

std::string ShapedNetwork::netns_path(int member) const {
  return "/run/netns/" + names_[static_cast<std::size_t>(member)];
}

std::string ShapedNetwork::address(int member) const { return fmt::format("10.213.0.{}", member + 1); }

}  // namespace dtsim::realrun
