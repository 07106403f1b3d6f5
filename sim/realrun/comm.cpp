#include "sim/realrun/comm.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <future>
#include <thread>

#include <pthread.h>
#include <sched.h>

#include "sim/realrun/netns.hpp"

namespace dtsim::realrun {

namespace {

// Runs the queued operations to the end; the first failure is thrown.
void run_all(asio::io_context& io, const std::vector<boost::system::error_code>& errors) {
  io.restart();
  io.run();
  for (const auto& e : errors)
    if (e) throw std::runtime_error("gradient exchange: " + e.message());
}

std::pair<std::size_t, std::size_t> chunk(std::size_t size, int n, int i) {
  const auto b = size * static_cast<std::size_t>(i) / static_cast<std::size_t>(n);
  const auto e = size * static_cast<std::size_t>(i + 1) / static_cast<std::size_t>(n);
  return {b, e - b};
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

// The calling thread only; best effort (a failure leaves it where the scheduler puts it).
void pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  (void)pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

}  // namespace

tcp::acceptor listen_loopback(asio::io_context& io) {
  return tcp::acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
}

tcp::socket connect_loopback(asio::io_context& io, unsigned short port) { return connect_to(io, "127.0.0.1", port); }

tcp::socket connect_to(asio::io_context& io, const std::string& address, unsigned short port, double patience_s) {
  const tcp::endpoint to(asio::ip::make_address_v4(address), port);
  const double give_up = now() + patience_s;
  for (;;) {
    tcp::socket s(io);
    boost::system::error_code e;
    s.connect(to, e);
    if (!e) {
      s.set_option(tcp::no_delay(true));
      return s;
    }
    if (now() > give_up) throw std::runtime_error("connecting to " + address + ": " + e.message());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

tcp::socket accept_one(tcp::acceptor& a) {
  tcp::socket s = a.accept();
  s.set_option(tcp::no_delay(true));
  return s;
}

void ring_allreduce(asio::io_context& io, std::vector<float>& data, int rank, int n, tcp::socket& next, tcp::socket& prev) {
  if (n < 2) return;
  // Kept between calls, as the parameter server keeps its buffers: a fresh 4 MB buffer per
  // all-reduce was zeroed page by page (page faults) on the worker's core.
  thread_local std::vector<float> incoming;
  incoming.resize(std::max(incoming.size(), data.size() / static_cast<std::size_t>(n) + 1));
  auto step = [&](int send_chunk, int recv_chunk, bool add) {
    const auto [sb, sn] = chunk(data.size(), n, send_chunk);
    const auto [rb, rn] = chunk(data.size(), n, recv_chunk);
    std::vector<boost::system::error_code> errors(2);
    asio::async_write(next, asio::buffer(data.data() + sb, sn * sizeof(float)),
                      [&](const boost::system::error_code& e, std::size_t) { errors[0] = e; });
    float* into = add ? incoming.data() : data.data() + rb;
    asio::async_read(prev, asio::buffer(into, rn * sizeof(float)),
                     [&](const boost::system::error_code& e, std::size_t) { errors[1] = e; });
    run_all(io, errors);
    if (add)
      for (std::size_t i = 0; i < rn; ++i) data[rb + i] += incoming[i];
  };
  auto mod = [n](int v) { return ((v % n) + n) % n; };
  // Reduce-scatter: after step s, chunk (rank - s - 1) holds s + 2 ranks' sum; rank ends owning
  // chunk (rank + 1) complete.
  for (int s = 0; s < n - 1; ++s) step(mod(rank - s), mod(rank - s - 1), true);
  // All-gather: pass the complete chunks around.
  for (int s = 0; s < n - 1; ++s) step(mod(rank + 1 - s), mod(rank - s), false);
}

void ps_push_pull(asio::io_context& io, std::vector<float>& data, tcp::socket& server) {
  std::vector<boost::system::error_code> errors(1);
  asio::write(server, asio::buffer(data));
  asio::async_read(server, asio::buffer(data), [&](const boost::system::error_code& e, std::size_t) { errors[0] = e; });
  run_all(io, errors);
}

void ps_serve_round(asio::io_context& io, std::vector<tcp::socket>& workers, std::vector<std::vector<float>>& in) {
  if (in.size() != workers.size()) throw std::runtime_error("parameter server: one buffer per worker");
  const std::size_t count = in.front().size();
  std::vector<boost::system::error_code> errors(workers.size());
  for (std::size_t w = 0; w < workers.size(); ++w)
    asio::async_read(workers[w], asio::buffer(in[w]), [&errors, w](const boost::system::error_code& e, std::size_t) { errors[w] = e; });
  run_all(io, errors);
  for (std::size_t w = 1; w < workers.size(); ++w)  // in worker order: the same sum on every run
    for (std::size_t i = 0; i < count; ++i) in[0][i] += in[w][i];
  for (std::size_t w = 0; w < workers.size(); ++w)
    asio::async_write(workers[w], asio::buffer(in[0]), [&errors, w](const boost::system::error_code& e, std::size_t) { errors[w] = e; });
  run_all(io, errors);
}

namespace {

// Sends `out` and receives `in` on `s` at once, as both ends of a bulk measurement do.
void send_and_receive(asio::io_context& io, tcp::socket& s, std::vector<char>& out, std::vector<char>& in) {
  std::vector<boost::system::error_code> errors(2);
  asio::async_write(s, asio::buffer(out), [&](const boost::system::error_code& e, std::size_t) { errors[0] = e; });
  asio::async_read(s, asio::buffer(in), [&](const boost::system::error_code& e, std::size_t) { errors[1] = e; });
  run_all(io, errors);
}

}  // namespace

LinkMeasure measure_loopback(double bulk_bytes) { return measure_link(bulk_bytes, "", "127.0.0.1", ""); }

LinkMeasure measure_link(double bulk_bytes, const std::string& netns_a, const std::string& address_a,
                         const std::string& netns_b) {
  const auto bytes = static_cast<std::size_t>(std::max(1.0, bulk_bytes));
  // One bulk transfer's rate on a shared 2-core machine varies 3x run to run: the median of
  // nine, after two untimed ones that let TCP grow its window.
  constexpr int kWarm = 20, kPings = 200, kBulkWarm = 2, kBulk = 9;
  // Workers are processes that each keep a core, so the two ends run on two different CPUs (on
  // one, the copies stay in that core's cache and loopback moved up to twice as fast).
  const auto cpus = allowed_cpus();
  std::promise<unsigned short> port;
  auto port_ready = port.get_future();
  std::exception_ptr peer_error;
  // The peer: echoes the pings, then sends and receives the bulk buffer at once. A thread of its
  // own, which alone enters the namespace.
  std::thread peer([&] {
    try {
      if (!netns_b.empty()) enter_netns(netns_b);
      if (cpus.size() >= 2) pin_to(cpus[1]);
      asio::io_context io;
      auto s = connect_to(io, address_a, port_ready.get(), 10);
      char b = 0;
      for (int i = 0; i < kWarm + kPings; ++i) {
        asio::read(s, asio::buffer(&b, 1));
        asio::write(s, asio::buffer(&b, 1));
      }
      std::vector<char> out(bytes, 1), in(bytes);
      for (int i = 0; i < kBulkWarm + kBulk; ++i) send_and_receive(io, s, out, in);
    } catch (...) {
      peer_error = std::current_exception();
    }
  });
  LinkMeasure m;
  std::exception_ptr error;
  std::thread self([&] {
    try {
      if (!netns_a.empty()) enter_netns(netns_a);
      if (cpus.size() >= 2) pin_to(cpus[0]);
      asio::io_context io;
      tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address_v4(address_a), 0));
      port.set_value(acceptor.local_endpoint().port());
      auto s = accept_one(acceptor);
      std::vector<double> rtt;
      char b = 0;
      for (int i = 0; i < kWarm + kPings; ++i) {
        const double t = now();
        asio::write(s, asio::buffer(&b, 1));
        asio::read(s, asio::buffer(&b, 1));
        if (i >= kWarm) rtt.push_back(now() - t);
      }
      std::nth_element(rtt.begin(), rtt.begin() + kPings / 2, rtt.end());
      m.latency_s = rtt[kPings / 2] / 2;
      std::vector<char> out(bytes, 2), in(bytes);
      std::vector<double> rate;
      for (int i = 0; i < kBulkWarm + kBulk; ++i) {
        const double t = now();
        send_and_receive(io, s, out, in);
        if (i >= kBulkWarm) rate.push_back(static_cast<double>(bytes) / (now() - t));
      }
      std::nth_element(rate.begin(), rate.begin() + kBulk / 2, rate.end());
      m.bandwidth = rate[kBulk / 2];
    } catch (...) {
      error = std::current_exception();
      try {
        port.set_value(0);  // the peer then fails to connect and ends
      } catch (...) {
      }
    }
  });
  self.join();
  peer.join();
  if (error) std::rethrow_exception(error);
  if (peer_error) std::rethrow_exception(peer_error);
  return m;
}

}  // namespace dtsim::realrun
