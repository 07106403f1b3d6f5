#pragma once
// What every collective algorithm's lowering (sim/network/algorithms/*.cpp) builds with: phases of
// flows added hop by hop, ranks grouped by node, and NCCL's ring channels.
#include <algorithm>
#include <cmath>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include "sim/network/algorithms.hpp"

namespace dtsim::network::algorithms::detail {

// Flows are added hop by hop; flows sharing a route in one phase run as one.
class Builder {
 public:
  explicit Builder(const Platform& pf) : pf_(pf) {}
  // A flow between two endpoints as they are (servers, host memory).
  void raw(int src, int dst, double bytes) {
    if (bytes <= 0) return;
    current_[{src, dst}] += bytes;
    alpha_ = std::max(alpha_, pf_.route_latency(src, dst));
  }
  void add_latency(double seconds) { extra_ += seconds; }
  void host_work(int endpoint, double seconds) {
    if (seconds > 0) work_.push_back({endpoint, seconds});
  }
  void hop(int a, int b, double bytes) {
    if (a == b || bytes <= 0) return;
    auto [src, dst] = endpoints(a, b);
    raw(src, dst, bytes);
  }
  // The endpoints a GPU-to-GPU hop runs between: NVSwitch ports inside a node, NICs across.
  std::pair<int, int> endpoints(int a, int b) const {
    if (pf_.torus() && pf_.pod_of(a) == pf_.pod_of(b)) return {pf_.fabric_endpoint(a), pf_.fabric_endpoint(b)};  // the torus
    bool same = pf_.node_of(a) == pf_.node_of(b);
    return {same ? pf_.fabric_endpoint(a) : pf_.nic_endpoint(a), same ? pf_.fabric_endpoint(b) : pf_.nic_endpoint(b)};
  }
  // Hops (endpoint pairs) that each move `bytes` in lockstep. They become a chain when no two of
  // them cross a link the same way (a shared host bridge would then carry several hops at once);
  // otherwise they are plain flows.
  void chain(const std::vector<std::pair<int, int>>& hops, double bytes) {
    if (bytes <= 0 || hops.empty()) return;
    bool distinct = hops.size() >= 3;
    if (distinct) distinct = crosses_each_link_once(hops);
    if (!distinct) {
      for (const auto& [src, dst] : hops) raw(src, dst, bytes);
      return;
    }
    // Segments of at most kChainHops: SimGrid 3.32's constraint bookkeeping is quadratic in the
    // links of one flow (a 16,384-hop chain took longer than its hops as flows).
    const std::size_t segments = (hops.size() + kChainHops - 1) / kChainHops;
    for (std::size_t k = 0; k < segments; ++k) {
      const std::size_t from = k * hops.size() / segments, to = (k + 1) * hops.size() / segments;
      chains_.push_back({chained_.size(), to - from});
      for (std::size_t i = from; i < to; ++i) chained_.push_back({hops[i].first, hops[i].second, bytes});
    }
    for (double l : hop_latency_) alpha_ = std::max(alpha_, l);
  }
  // A ring channel's hops: chain() and ring_hops() at once, each hop's route found once.
  void ring(const std::vector<std::pair<int, int>>& hops, double bytes) {
    hop_latency_.clear();
    chain(hops, bytes);
    if (hop_latency_.size() != hops.size()) {  // chain() did not route them (too few, or no bytes)
      hop_latency_.clear();
      for (const auto& [src, dst] : hops) hop_latency_.push_back(pf_.route_latency(src, dst));
    }
    ring_latencies(hop_latency_);
  }
  static constexpr std::size_t kChainHops = 64;
  // Closes the phase. `steps` aggregated steps wait for the slowest hop each; the flows
  // themselves paid one.
  void end_phase(double steps = 1) {
    if (current_.empty() && chained_.empty() && work_.empty()) return;
    Phase ph;
    for (const auto& [route, b] : current_) ph.flows.push_back({route.first, route.second, b});
    for (const auto& c : chains_) ph.chains.push_back({c.first + ph.flows.size(), c.count});
    ph.flows.insert(ph.flows.end(), chained_.begin(), chained_.end());
    chained_.clear();
    chains_.clear();
    ph.work = std::move(work_);
    work_.clear();
    // Each step waits for the slowest hop, except in a ring: its chunks move on hop by hop, so a
    // chunk's latency is the sum of the hops it crosses, `steps` times the ring's mean hop (each
    // chunk starts elsewhere), of which the chain's flow pays the slowest (NCCL's tuning.cc
    // counts a ring's intra- and inter-node steps apart the same way, lines 404-412).
    const double mean_excess = ring_hop_ > 0 ? steps * (ring_hop_ - alpha_) : 0.0;
    ph.latency = std::max(0.0, std::max(0.0, steps - 1.0) * alpha_ + mean_excess) + extra_;
    out_.phases.push_back(std::move(ph));
    current_.clear();
    alpha_ = 0;
    extra_ = 0;
    ring_hop_ = 0;
  }
  // The phase being built is a ring whose hops (one channel's) have these route latencies.
  void ring_hops(const std::vector<std::pair<int, int>>& hops) {
    hop_latency_.clear();
    for (const auto& [src, dst] : hops) hop_latency_.push_back(pf_.route_latency(src, dst));
    ring_latencies(hop_latency_);
  }
  LoweredCollective done() {
    end_phase();
    return std::move(out_);
  }

 private:
  void ring_latencies(const std::vector<double>& latency) {
    double sum = 0;
    for (double l : latency) sum += l;
    if (!latency.empty()) ring_hop_ = std::max(ring_hop_, sum / static_cast<double>(latency.size()));
  }
  // Whether no two hops cross a link the same way; each hop's route latency in hop_latency_.
  // Marks per link direction, all clear between calls (only the marked ones are cleared): the
  // check costs what the hops cross, not the platform's size.
  bool crosses_each_link_once(const std::vector<std::pair<int, int>>& hops) {
    HopChecks* known = RememberHops::current();
    if (!known) return route_hops(hops);
    if (const auto it = known->seen.find(hops); it != known->seen.end()) {
      hop_latency_ = it->second.second;
      return it->second.first;
    }
    const bool distinct = route_hops(hops);
    if (known->hops + hops.size() <= HopChecks::kMaxHops) {
      known->hops += hops.size();
      known->seen.emplace(hops, std::make_pair(distinct, hop_latency_));
    }
    return distinct;
  }
  // crosses_each_link_once(), found by routing every hop.
  bool route_hops(const std::vector<std::pair<int, int>>& hops) {
    thread_local std::vector<char> used;
    thread_local std::vector<Hop> route;
    thread_local std::vector<std::size_t> marked;
    if (used.size() < pf_.links().size() * 2) used.resize(pf_.links().size() * 2, 0);
    bool distinct = true;
    hop_latency_.clear();
    for (const auto& [src, dst] : hops) {
      route.clear();
      pf_.append_route(src, dst, route);
      double l = 0;
      for (const auto& h : route) {
        const std::size_t s = static_cast<std::size_t>(h.link) * 2 + (h.up ? 0 : 1);
        if (used[s]) distinct = false;
        used[s] = 1;
        marked.push_back(s);
        l += pf_.links()[static_cast<std::size_t>(h.link)].latency;
      }
      hop_latency_.push_back(l);
    }
    for (std::size_t s : marked) used[s] = 0;
    marked.clear();
    return distinct;
  }

  const Platform& pf_;
  std::map<std::pair<int, int>, double> current_;
  std::vector<Flow> chained_;
  std::vector<Chain> chains_;
  std::vector<HostWork> work_;
  double alpha_ = 0, extra_ = 0, ring_hop_ = 0;
  std::vector<double> hop_latency_;  // route latency of each hop last chained or ringed
  LoweredCollective out_;
};

// Members grouped by node, nodes in order of first appearance: nodes[i] is node i's members (in
// the order given), one array for all of them.
class ByNode {
 public:
  std::size_t size() const { return start_.size() - 1; }
  std::span<const int> operator[](std::size_t i) const { return {members_.data() + start_[i], start_[i + 1] - start_[i]}; }
  struct Iterator {
    const ByNode* of;
    std::size_t i;
    std::span<const int> operator*() const { return (*of)[i]; }
    Iterator& operator++() { return ++i, *this; }
    bool operator!=(const Iterator& o) const { return i != o.i; }
  };
  Iterator begin() const { return {this, 0}; }
  Iterator end() const { return {this, size()}; }

 private:
  friend ByNode by_node(const Platform& pf, const std::vector<int>& ranks);
  std::vector<int> members_;
  std::vector<std::size_t> start_{0};
};

inline ByNode by_node(const Platform& pf, const std::vector<int>& ranks) {
  ByNode out;
  // Each node's place in the order plus one (0: not seen), all 0 between calls.
  thread_local std::vector<std::size_t> index;
  thread_local std::vector<std::size_t> count;
  if (index.size() < static_cast<std::size_t>(pf.spec().nodes)) index.resize(static_cast<std::size_t>(pf.spec().nodes), 0);
  count.clear();
  for (int g : ranks) {
    std::size_t& at = index[static_cast<std::size_t>(pf.node_of(g))];
    if (at == 0) {
      count.push_back(0);
      at = count.size();
    }
    ++count[at - 1];
  }
  for (std::size_t n : count) out.start_.push_back(out.start_.back() + n);
  out.members_.resize(ranks.size());
  std::vector<std::size_t> next(out.start_.begin(), out.start_.end() - 1);
  for (int g : ranks) out.members_[next[index[static_cast<std::size_t>(pf.node_of(g))] - 1]++] = g;
  for (int g : ranks) index[static_cast<std::size_t>(pf.node_of(g))] = 0;
  return out;
}

inline int floor_pow2(int p) {
  int q = 1;
  while (q * 2 <= p) q *= 2;
  return q;
}

// NCCL's ring channels over `ranks`: across nodes one per NIC, each entering every node at another
// GPU; each channel the ranks in its ring order.
inline std::vector<std::vector<int>> ring_orders(const Platform& pf, const std::vector<int>& ranks) {
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  auto nodes = by_node(pf, sorted);
  std::size_t widest = 0;
  for (const auto m : nodes) widest = std::max(widest, m.size());
  const int channels =
      nodes.size() > 1 && !pf.torus() ? std::max(1, std::min(pf.spec().nics_per_node, static_cast<int>(widest))) : 1;
  std::vector<std::vector<int>> orders;
  for (int c = 0; c < channels; ++c) {
    auto& order = orders.emplace_back();
    for (const auto members : nodes) {
      const std::size_t n = members.size();
      const std::size_t entry = static_cast<std::size_t>(c) * n / static_cast<std::size_t>(channels);
      for (std::size_t i = 0; i < n; ++i) order.push_back(members[(entry + i) % n]);
    }
  }
  return orders;
}

// ring_orders(), or what it gave for the same ranks before (RememberHops); `own` holds it when
// it is not kept there.
inline const std::vector<std::vector<int>>& known_ring_orders(const Platform& pf, const std::vector<int>& ranks,
                                                             std::vector<std::vector<int>>& own) {
  HopChecks* known = RememberHops::current();
  if (!known) return own = ring_orders(pf, ranks);
  if (const auto it = known->ring_orders.find(ranks); it != known->ring_orders.end()) return it->second;
  own = ring_orders(pf, ranks);
  if (known->hops + ranks.size() > HopChecks::kMaxHops) return own;
  known->hops += ranks.size();
  return known->ring_orders.emplace(ranks, std::move(own)).first->second;
}

// The endpoints of one hop of a ring channel.
inline std::pair<int, int> ring_hop(const Platform& pf, const Builder& b, int from, int to) {
  if (pf.node_of(from) == pf.node_of(to) || pf.torus()) return b.endpoints(from, to);  // a torus: its links, or NICs between pods
  // NCCL keeps a channel on one rail: the sending node hands the data to the NIC on the
  // receiving GPU's rail (PXN), so the hop never crosses between rails.
  const int twin = pf.node_of(from) * pf.spec().gpus_per_node + pf.local_of(to);
  return {pf.nic_endpoint(twin), pf.nic_endpoint(to)};
}

}  // namespace dtsim::network::algorithms::detail
