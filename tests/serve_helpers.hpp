#pragma once
// A `dtsim serve` child on an ephemeral loopback port, and raw HTTP requests to it.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

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

struct Reply {
  int status = 0;
  std::string head, body;
};

inline int connect_to(int port) {
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(s);
    return -1;
  }
  // A safety net for a broken server, not a measured limit: a test never waits forever.
  timeval tv{120, 0};
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return s;
}

// `headers`: the request's own header lines ("Name: value\r\n"); by default a Host naming the server.
inline Reply request(int port, const std::string& method, const std::string& path, const std::string& body = "",
              std::string headers = "") {
  Reply r;
  const int s = connect_to(port);
  if (s < 0) return r;
  if (headers.empty()) headers = "Host: localhost:" + std::to_string(port) + "\r\n";
  std::string req = method + " " + path + " HTTP/1.1\r\n" + headers + "Content-Type: application/json\r\nContent-Length: " +
                    std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
  for (std::size_t sent = 0; sent < req.size();) {
    const auto n = send(s, req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // an oversized body may be refused before it is all sent
    sent += static_cast<std::size_t>(n);
  }
  std::string all;
  char buf[65536];
  for (ssize_t n; (n = recv(s, buf, sizeof buf, 0)) > 0;) all.append(buf, static_cast<std::size_t>(n));
  close(s);
  const auto end = all.find("\r\n\r\n");
  if (end == std::string::npos) return r;
  r.head = all.substr(0, end);
  r.body = all.substr(end + 4);
  r.status = std::stoi(r.head.substr(9, 3));
  return r;
}

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
