#pragma once
// A `dtsim serve` child on an ephemeral loopback port, and raw HTTP requests to it.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "http_client.hpp"

namespace dtsim::test::serve {

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A `dtsim serve --port 0` child with these further arguments, its temporary folders in `tmpdir`
// when given; the port is read from its first line. DTSIM_TEST_BINARY runs another build instead,
// to check that a test fails on older code.
class Server {
 public:
  explicit Server(std::vector<std::string> args = {}, const std::string& tmpdir = "") {
    const char* other = std::getenv("DTSIM_TEST_BINARY");
    args.insert(args.begin(), {other ? other : DTSIM_BINARY, "serve", "--port", "0"});
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], 1);
      close(fds[0]);
      if (!tmpdir.empty()) setenv("TMPDIR", tmpdir.c_str(), 1);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(fds[1]);
    std::string line;
    char c;
    while (read(fds[0], &c, 1) == 1 && c != '\n') line += c;
    close(fds[0]);
    const auto colon = line.rfind(':');
    if (colon != std::string::npos) port_ = std::stoi(line.substr(colon + 1));
  }
  ~Server() {
    if (pid_ > 0) kill(pid_, SIGKILL);
    if (pid_ > 0) waitpid(pid_, nullptr, 0);
  }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  // Sends SIGTERM and waits for the server to end; its exit status.
  int stop() {
    int st = 0;
    kill(pid_, SIGTERM);
    waitpid(pid_, &st, 0);
    pid_ = -1;
    return st;
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

struct Cli {
  int code;
  std::string out, err, report;  // report: out/report.html, with `html`
};

// `dtsim run scenario.json -o out --format json` (`--html` too, with `html`) in `dir`, as the
// server's child runs it; `dir` holds scenario.json. DTSIM_BINARY is the build under test.
inline Cli run_cli(const std::string& dir, bool html = false) {
  const std::string cmd = "cd " + dir + " && " + DTSIM_BINARY + " run scenario.json -o out --format json" +
                          (html ? " --html" : "") + " > stdout.txt 2> stderr.txt";
  const int st = std::system(cmd.c_str());
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, slurp(dir + "/stdout.txt"), slurp(dir + "/stderr.txt"),
          html ? slurp(dir + "/out/report.html") : ""};
}

// Everything before the provenance block, which holds the wall time of the run.
inline std::string without_provenance(const std::string& json) { return json.substr(0, json.find("\"provenance\"")); }

}  // namespace dtsim::test::serve
