// Issue 16 item 5: `dtsim serve` on an ephemeral port: the API against `dtsim run --format json`
// byte for byte, bad and oversized requests, and the page.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "helpers.hpp"

using namespace dtsim;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A `dtsim serve --port 0` child; the port is read from its first line.
class Server {
 public:
  Server() {
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], 1);
      close(fds[0]);
      execl(DTSIM_BINARY, DTSIM_BINARY, "serve", "--port", "0", static_cast<char*>(nullptr));
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
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  int port() const { return port_; }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

struct Reply {
  int status = 0;
  std::string head, body;
};

Reply request(int port, const std::string& method, const std::string& path, const std::string& body = "") {
  Reply r;
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(s);
    return r;
  }
  std::string req = method + " " + path + " HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: " +
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
  std::string out, err;
};

// `dtsim run scenario.json --format json` in `dir`, as the server runs it.
Cli run_cli(const test::TempDir& dir) {
  const std::string cmd = "cd " + dir.path() + " && " + DTSIM_BINARY +
                          " run scenario.json -o out --format json > stdout.txt 2> stderr.txt";
  const int st = std::system(cmd.c_str());
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, slurp(dir.path("stdout.txt")), slurp(dir.path("stderr.txt"))};
}

// Everything before the provenance block, which holds the wall time of the run.
std::string without_provenance(const std::string& json) { return json.substr(0, json.find("\"provenance\"")); }

const std::string kScenario = R"({
  "schema_version": 1, "name": "serve-test",
  "model": {"preset": "gpt2"},
  "hardware": {"device": "a100-sxm-80gb"},
  "cluster": {"preset": "dgx-a100", "nodes": 1},
  "parallelism": {"data": 2, "pipeline": 4, "micro_batch_size": 2, "pipeline_schedule": "gpipe"},
  "training": {"global_batch_size": 32, "steps": 1000},
  "simulation": {"backend": "analytical"}
})";

}  // namespace

TEST(Serve, ApiAnswersWhatRunPrintsByteForByte) {
  Server server;
  ASSERT_GT(server.port(), 0);
  const auto r = request(server.port(), "POST", "/api/run", kScenario);
  ASSERT_EQ(r.status, 200) << r.head << r.body;
  EXPECT_NE(r.head.find("application/json"), std::string::npos) << r.head;
  test::TempDir dir;
  dir.file("scenario.json", kScenario);
  const auto cli = run_cli(dir);
  ASSERT_EQ(cli.code, 0) << cli.err;
  EXPECT_NE(r.body.find("\"provenance\""), std::string::npos);
  EXPECT_EQ(without_provenance(r.body), without_provenance(cli.out));
  EXPECT_NE(r.body.find("\"pipeline_bubble\""), std::string::npos);
}

TEST(Serve, BadInputIs400WithTheCliErrorText) {
  Server server;
  for (const std::string bad : {std::string(R"({"schema_version": 1, "name": )"),
                                std::string(kScenario).replace(kScenario.find("\"data\": 2"), 9, "\"data\": 3")}) {
    const auto r = request(server.port(), "POST", "/api/run", bad);
    EXPECT_EQ(r.status, 400) << r.body;
    test::TempDir dir;
    dir.file("scenario.json", bad);
    const auto cli = run_cli(dir);
    EXPECT_EQ(cli.code, 2);
    EXPECT_EQ(r.body, cli.err);
    EXPECT_EQ(r.body.rfind("error: scenario.json", 0), 0u) << r.body;
  }
}

TEST(Serve, OversizedIs413AndUnknownIs404) {
  Server server;
  const auto r = request(server.port(), "POST", "/api/run", std::string(2 << 20, ' '));
  EXPECT_EQ(r.status, 413) << r.body;
  EXPECT_NE(r.body.find("larger than the server's limit of 1048576 bytes"), std::string::npos) << r.body;
  EXPECT_EQ(request(server.port(), "GET", "/etc/passwd").status, 404);
  EXPECT_EQ(request(server.port(), "GET", "/api/run").status, 405);
}

TEST(Serve, PageIsSelfContained) {
  Server server;
  const auto r = request(server.port(), "GET", "/");
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.head.find("text/html"), std::string::npos);
  EXPECT_NE(r.body.find("fetch(\"/api/run\""), std::string::npos);
  for (const char* control : {"name=\"schedule\"", "name=\"zero\"", "name=\"recompute\"", "name=\"algorithm\"",
                              "name=\"tensor\"", "name=\"pipeline\"", "name=\"sigma\""})
    EXPECT_NE(r.body.find(control), std::string::npos) << control;
  // Nothing fetched from elsewhere: no external scripts, styles or fonts.
  EXPECT_EQ(r.body.find("http://"), std::string::npos);
  EXPECT_EQ(r.body.find("https://"), std::string::npos);
  EXPECT_EQ(r.body.find("src="), std::string::npos);
}
