// `dtsim serve`: an HTTP server (Boost.Beast, one thread per connection) for the explorer page.
// Each simulation runs as a child `dtsim run` (posix_spawn, never a shell) in a private temporary
// folder, so a request gets exactly the bytes the command line prints, a crash or a runaway
// simulation takes down only the child, and the time limit can be enforced by killing it.
#include "sim/cli/serve.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <utility>  // before Boost 1.74's asio, which uses std::exchange without it
#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "sim/core/errors.hpp"
#include "sim/core/interrupt.hpp"

extern char** environ;

namespace dtsim::cli {

namespace {

namespace fs = std::filesystem;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;

struct Answer {
  http::status status = http::status::ok;
  std::string body, type = "application/json";
};

Answer text(http::status s, std::string body) { return {s, std::move(body), "text/plain; charset=utf-8"}; }

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The scenario as sent, except that one naming no backend gets the analytical one (milliseconds,
// not the SimGrid replay's seconds); malformed JSON goes to the child untouched so its error
// (with line and column) is the command line's.
std::string with_default_backend(const std::string& body) {
  auto j = nlohmann::ordered_json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return body;
  if (j.contains("simulation") && j["simulation"].is_object() && j["simulation"].contains("backend")) return body;
  if (j.contains("simulation") && !j["simulation"].is_object()) return body;
  j["simulation"]["backend"] = "analytical";
  return j.dump(2);
}

// `dtsim run scenario.json -o out --format json` in a fresh folder, as a child.
Answer simulate(const ServeOptions& o, const std::string& body) {
  std::string tmpl = (fs::temp_directory_path() / "dtsim-serve-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) return text(http::status::internal_server_error, "cannot make a temporary folder\n");
  const fs::path dir = tmpl;
  struct Cleanup {
    fs::path d;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(d, ec);
    }
  } cleanup{dir};
  std::ofstream(dir / "scenario.json", std::ios::binary) << with_default_backend(body);

  const std::string exe = fs::read_symlink("/proc/self/exe").string();
  std::vector<std::string> args{exe, "run", "scenario.json", "-o", "out", "--format", "json"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addchdir_np(&fa, dir.c_str());  // paths in its errors read as the CLI's
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "stdout.txt", O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 2, "stderr.txt", O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return text(http::status::internal_server_error, "cannot start dtsim run\n");
  interrupt::watch_child(pid);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(o.time_limit_s);
  int status = 0;
  bool late = false;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      late = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  interrupt::forget_child(pid);
  if (late)
    return text(http::status::gateway_timeout,
                "error: the simulation ran past the server's time limit (" + std::to_string(o.time_limit_s) + " s)\n");
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == 0) return {http::status::ok, slurp(dir / "stdout.txt")};
  if (code == 2) return text(http::status::bad_request, slurp(dir / "stderr.txt"));
  return text(http::status::internal_server_error, slurp(dir / "stderr.txt"));
}

std::atomic<int> running{0}, sessions{0};

Answer route(const ServeOptions& o, const http::request<http::string_body>& req) {
  std::string target(req.target());
  target = target.substr(0, target.find('?'));  // the page reads its query itself
  if (target == "/" || target == "/index.html") {
    if (req.method() != http::verb::get && req.method() != http::verb::head)
      return text(http::status::method_not_allowed, "GET only\n");
    return {http::status::ok, serve_page(), "text/html; charset=utf-8"};
  }
  if (target == "/api/run") {
    if (req.method() != http::verb::post) return text(http::status::method_not_allowed, "POST a scenario JSON\n");
    if (running.fetch_add(1) >= o.jobs) {
      running.fetch_sub(1);
      return text(http::status::service_unavailable,
                  "error: " + std::to_string(o.jobs) + " simulations are running; try again\n");
    }
    Answer a = simulate(o, req.body());
    running.fetch_sub(1);
    return a;
  }
  return text(http::status::not_found, "not found: try / or POST /api/run\n");
}

void session(const ServeOptions& o, tcp::socket socket) {
  // A client that stops sending or reading frees its thread after this long.
  timeval tv{30, 0};
  setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(socket.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  boost::beast::flat_buffer buffer;
  http::request_parser<http::string_body> parser;
  parser.body_limit(o.max_body);
  boost::beast::error_code ec;
  http::read(socket, buffer, parser, ec);
  Answer a;
  unsigned version = 11;
  if (ec == http::error::body_limit) {
    a = text(http::status::payload_too_large,
             "error: the scenario is larger than the server's limit of " + std::to_string(o.max_body) + " bytes\n");
  } else if (ec) {
    return;  // not HTTP, or gone
  } else {
    version = parser.get().version();
    a = route(o, parser.get());
  }
  http::response<http::string_body> res{a.status, version};
  res.set(http::field::server, "dtsim");
  res.set(http::field::content_type, a.type);
  res.set(http::field::cache_control, "no-store");
  res.keep_alive(false);
  res.body() = std::move(a.body);
  res.prepare_payload();
  http::write(socket, res, ec);
  socket.shutdown(tcp::socket::shutdown_send, ec);
}

}  // namespace

int serve(const ServeOptions& o) {
  boost::asio::io_context ioc;
  boost::system::error_code ec;
  const auto address = boost::asio::ip::make_address(o.bind, ec);
  if (ec) throw InputError("", "--bind", "\"" + o.bind + "\" is not an IP address");
  if (!address.is_loopback())
    std::cerr << "warning: serving on " << o.bind << ": anyone who can reach it can run simulations here\n";
  tcp::acceptor acceptor(ioc);
  acceptor.open(address.is_v6() ? tcp::v6() : tcp::v4());
  acceptor.set_option(tcp::acceptor::reuse_address(true));
  acceptor.bind({address, static_cast<unsigned short>(o.port)}, ec);
  if (ec) throw std::runtime_error("cannot listen on " + o.bind + ":" + std::to_string(o.port) + ": " + ec.message());
  acceptor.listen();
  const auto port = acceptor.local_endpoint().port();
  std::cout << "dtsim serve: http://" << (address.is_v6() ? "[" + o.bind + "]" : o.bind) << ":" << port << "/" << std::endl;
  constexpr int kMaxSessions = 64;  // open connections; past it new ones are closed at once
  for (;;) {
    tcp::socket socket(ioc);
    acceptor.accept(socket, ec);
    if (ec) continue;
    if (sessions.load() >= kMaxSessions) continue;  // the socket closes here
    sessions.fetch_add(1);
    std::thread([&o, s = std::move(socket)]() mutable {
      session(o, std::move(s));
      sessions.fetch_sub(1);
    }).detach();
  }
}

}  // namespace dtsim::cli
