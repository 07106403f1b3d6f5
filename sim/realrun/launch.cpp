#include "sim/realrun/launch.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "sim/core/interrupt.hpp"

extern char** environ;

namespace dtsim::realrun {

namespace {

std::runtime_error sys_error(const std::string& what) { return std::runtime_error(what + ": " + std::strerror(errno)); }

void kill_all(std::vector<Child>& children) {
  for (auto& c : children)
    if (!c.exited && c.pid > 0) kill(c.pid, SIGKILL);
  for (auto& c : children) {
    if (!c.exited && c.pid > 0) {
      while (waitpid(c.pid, &c.status, 0) < 0 && errno == EINTR) {
      }
      c.exited = true;
    }
    interrupt::forget_child(c.pid);
    if (c.out >= 0) close(c.out);
    c.out = -1;
  }
}

}  // namespace

double steady_now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

int listen_fd(int& port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw sys_error("socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd, 64) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const auto e = sys_error("listening on 127.0.0.1");
    close(fd);
    throw e;
  }
  port = ntohs(a.sin_port);
  return fd;
}

Child spawn_self(const std::vector<std::string>& args, int inherit, int threads) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) throw sys_error("pipe");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  if (inherit >= 0) posix_spawn_file_actions_adddup2(&actions, inherit, 3);  // dup2 clears close-on-exec
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<std::string> argv{"dtsim"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "OMP_NUM_THREADS=", 16) != 0) env.emplace_back(*e);
  env.push_back(fmt::format("OMP_NUM_THREADS={}", threads));
  std::vector<char*> cenv;
  for (auto& e : env) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  Child c;
  const int rc = posix_spawn(&c.pid, "/proc/self/exe", &actions, &attr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(pipe_fds[1]);
  if (rc != 0) {
    close(pipe_fds[0]);
    errno = rc;
    throw sys_error("starting a worker process");
  }
  interrupt::watch_child(c.pid);
  c.out = pipe_fds[0];
  return c;
}

std::string supervise(std::vector<Child>& children, double deadline_s) {
  std::string failure;
  {
    interrupt::Hold hold;  // a signal now is passed to the children and acted on below
    while (failure.empty()) {
      std::vector<pollfd> fds;
      for (auto& c : children)
        if (c.out >= 0) fds.push_back({c.out, POLLIN, 0});
      if (!fds.empty()) poll(fds.data(), fds.size(), 50);
      for (auto& c : children) {
        if (c.out < 0) continue;
        char buf[4096];
        pollfd p{c.out, POLLIN, 0};
        while (poll(&p, 1, 0) > 0) {
          const ssize_t n = read(c.out, buf, sizeof buf);
          if (n <= 0) {
            close(c.out);
            c.out = -1;
            break;
          }
          c.output.append(buf, static_cast<std::size_t>(n));
        }
      }
      bool all = true;
      for (auto& c : children) {
        if (!c.exited && waitpid(c.pid, &c.status, WNOHANG) == c.pid) {
          c.exited = true;
          interrupt::forget_child(c.pid);
          if (!WIFEXITED(c.status) || WEXITSTATUS(c.status) != 0)
            failure = WIFEXITED(c.status) ? fmt::format("a worker process failed (exit {})", WEXITSTATUS(c.status))
                                          : fmt::format("a worker process was killed (signal {})", WTERMSIG(c.status));
        }
        all = all && c.exited && c.out < 0;
      }
      if (all) break;
      if (interrupt::pending()) failure = "interrupted";
      if (failure.empty() && steady_now() > deadline_s) failure = "timed out";
    }
    kill_all(children);
  }
  interrupt::exit_if_pending();
  return failure;
}

}  // namespace dtsim::realrun
