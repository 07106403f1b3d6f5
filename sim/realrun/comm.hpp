#pragma once
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without it

#include <boost/asio.hpp>
#include <cstdint>
#include <string>
#include <vector>

// The real trainer's gradient exchange over TCP on 127.0.0.1 (Boost.Asio): a ring all-reduce and
// a parameter server's push and pull. Blocking from the caller's view; inside, each step sends and
// receives at once so that no peer waits on a full socket buffer.
namespace dtsim::realrun {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

// A listening socket on 127.0.0.1 with a port the kernel picks.
tcp::acceptor listen_loopback(asio::io_context& io);
// A connection to 127.0.0.1:port, Nagle off (small chunks go at once).
tcp::socket connect_loopback(asio::io_context& io, unsigned short port);
// The same to any address, retrying while nothing listens there yet, for up to `patience_s`.
tcp::socket connect_to(asio::io_context& io, const std::string& address, unsigned short port, double patience_s = 0);
tcp::socket accept_one(tcp::acceptor& a);

// Sums `data` over the n ranks of a ring in place (every rank ends with the same sum): reduce-
// scatter then all-gather, n - 1 steps each of one n-th of the buffer. `next` is connected to rank
// (rank + 1) % n, `prev` to (rank + n - 1) % n.
void ring_allreduce(asio::io_context& io, std::vector<float>& data, int rank, int n, tcp::socket& next, tcp::socket& prev);

// A parameter server's worker: pushes `data`, pulls the sum over all workers back into it.
void ps_push_pull(asio::io_context& io, std::vector<float>& data, tcp::socket& server);
// One round of the server: receives every worker's buffer into `in` (one buffer per worker, each
// of the gradient's size), sends each the sum. The caller keeps `in` between rounds: allocating
// and zeroing them each round would take a core from the workers while they compute.
void ps_serve_round(asio::io_context& io, std::vector<tcp::socket>& workers, std::vector<std::vector<float>>& in);

// Loopback as the trainer's network sees it: one-way latency (half the median round trip of a
// small message) and the rate of bulk transfers in both directions at once, per direction.
struct LinkMeasure {
  double latency_s = 0, bandwidth = 0;  // bytes/s
};
LinkMeasure measure_loopback(double bulk_bytes);
// The same between two network namespaces (paths for setns): a listener at `address_a` in the
// first, a client in the second.
LinkMeasure measure_link(double bulk_bytes, const std::string& netns_a, const std::string& address_a,
                         const std::string& netns_b);

}  // namespace dtsim::realrun
