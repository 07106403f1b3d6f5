// `dtsim serve`: an HTTP server (Boost.Beast) for the explorer page. One thread runs every
// connection asynchronously, each with a deadline that fires however the client behaves; a request
// is answered on a thread of its own (api::handle), its simulation on the pool of worker threads
// (serve_local.cpp; a child `dtsim run` for SimGrid), and past the connection cap a client gets
// 503 rather than a closed socket.
#include "sim/cli/serve.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <utility>  // before Boost 1.74's asio, which uses std::exchange without it
#include <boost/asio.hpp>
#include <boost/beast.hpp>
#include <chrono>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include "sim/cli/serve_api.hpp"
#include "sim/cli/serve_child.hpp"
#include "sim/cli/serve_local.hpp"
#include "sim/cli/serve_lessons.hpp"
#include "sim/core/errors.hpp"

namespace dtsim::cli {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using std::chrono::seconds;

std::atomic<int> g_sessions{0}, g_refusing{0};

std::string header(const http::request<http::string_body>& req, http::field f, bool& present) {
  const auto it = req.find(f);
  present = it != req.end();
  return present ? std::string(it->value()) : "";
}

api::Request request_of(const http::request<http::string_body>& req) {
  api::Request r;
  r.method = std::string(req.method_string());
  r.target = std::string(req.target());
  r.host = header(req, http::field::host, r.has_host);
  r.origin = header(req, http::field::origin, r.has_origin);
  r.body = req.body();
  return r;
}

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket s, const ServeOptions& o, Pool& pool, unsigned short port, std::atomic<int>& count)
      : stream_(std::move(s)), o_(o), pool_(pool), port_(port), count_(count) {}
  ~Session() { count_.fetch_sub(1); }

  // The whole request must arrive within the client timeout: a slow sender gains nothing per byte.
  void read() {
    parser_.emplace();
    parser_->body_limit(o_.max_body);
    parser_->header_limit(16 << 10);
    stream_.expires_after(seconds(o_.client_timeout_s));
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, std::size_t) { self->on_read(ec); });
  }

  void send(const api::Answer& a, unsigned version) {
    res_ = {static_cast<http::status>(a.status), version};
    res_.set(http::field::server, "dtsim");
    res_.set(http::field::content_type, a.type);
    res_.set(http::field::cache_control, "no-store");
    res_.keep_alive(false);
    res_.body() = a.body;
    res_.prepare_payload();
    stream_.expires_after(seconds(o_.client_timeout_s));
    http::async_write(stream_, res_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec) return;
      self->stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
      self->stream_.expires_after(seconds(std::min(kLingerS, self->o_.client_timeout_s)));
      self->drain();
    });
  }

 private:
  static constexpr int kLingerS = 5;

  void on_read(beast::error_code ec) {
    if (ec == http::error::body_limit)
      return send(api::text(413, "error: the scenario is larger than the server's limit of " +
                                     std::to_string(o_.max_body) + " bytes\n"),
                  11);
    if (ec) return;  // past the deadline, not HTTP, or gone: the socket closes with the session
    stream_.expires_never();  // a simulation has its own time limit
    const unsigned version = parser_->get().version();
    std::thread([self = shared_from_this(), r = request_of(parser_->get()), version] {
      const auto run = [&self](const std::string& s, bool report) {
        return run_simulation(self->o_, self->pool_, s, report);
      };
      api::Answer a = api::handle(self->o_, self->port_, r, run);
      asio::post(self->stream_.get_executor(), [self, a = std::move(a), version] { self->send(a, version); });
    }).detach();
  }

  // Reads what the client still sends until it closes (or the linger ends), so that closing does
  // not reset the connection and destroy the answer before the client has read it.
  void drain() {
    stream_.async_read_some(asio::buffer(scratch_), [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (!ec) self->drain();
    });
  }

  beast::tcp_stream stream_;
  const ServeOptions& o_;
  Pool& pool_;
  unsigned short port_;
  std::atomic<int>& count_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> res_;
  char scratch_[4096];
};

// A connection within the cap is read; past it the client gets 503 at once. Past four times the
// cap (a flood), a connection is closed unanswered.
void admit(tcp::socket s, const ServeOptions& o, Pool& pool, unsigned short port) {
  if (g_sessions.fetch_add(1) < o.max_connections) {
    std::make_shared<Session>(std::move(s), o, pool, port, g_sessions)->read();
    return;
  }
  g_sessions.fetch_sub(1);
  if (g_refusing.fetch_add(1) >= 4 * o.max_connections) {
    g_refusing.fetch_sub(1);
    return;
  }
  std::make_shared<Session>(std::move(s), o, pool, port, g_refusing)
      ->send(api::text(503, "error: " + std::to_string(o.max_connections) +
                                " connections are open; try again\n"),
             11);
}

void accept(tcp::acceptor& acceptor, const ServeOptions& o, Pool& pool, unsigned short port) {
  acceptor.async_accept([&acceptor, &o, &pool, port](beast::error_code ec, tcp::socket s) {
    if (!ec) admit(std::move(s), o, pool, port);
    if (acceptor.is_open()) accept(acceptor, o, pool, port);
  });
}

}  // namespace

int serve(const ServeOptions& o) {
  lessons::all();  // a bad lesson file is an error now (exit 2), not a page that cannot open it
  asio::io_context ioc;
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(o.bind, ec);
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
  // SIGINT or SIGTERM: stop accepting, kill and reap every child, remove its folder, then exit.
  asio::signal_set signals(ioc, SIGINT, SIGTERM);
  int signal = 0;
  signals.async_wait([&](beast::error_code, int sig) {
    signal = sig;
    ioc.stop();
  });
  std::cout << "dtsim serve: http://" << (address.is_v6() ? "[" + o.bind + "]" : o.bind) << ":" << port << "/" << std::endl;
  // One worker per core: an analytical simulation is CPU alone.
  Pool pool(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())), static_cast<std::size_t>(o.queue));
  accept(acceptor, o, pool, port);
  ioc.run();
  stop_children();
  std::cout.flush();
  // Request threads may still hold sessions of this io_context: end here, without destructors.
  _exit(128 + signal);
}

}  // namespace dtsim::cli
