#include "sim/network/algorithms.hpp"

#include <algorithm>
#include <cmath>
#include <map>

namespace dtsim::network::algorithms {

namespace {

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
    if (pf_.torus()) return {pf_.fabric_endpoint(a), pf_.fabric_endpoint(b)};  // chips talk over the torus
    bool same = pf_.node_of(a) == pf_.node_of(b);
    return {same ? pf_.fabric_endpoint(a) : pf_.nic_endpoint(a), same ? pf_.fabric_endpoint(b) : pf_.nic_endpoint(b)};
  }
  // Hops (endpoint pairs) that each move `bytes` in lockstep. They become a chain when no two of
  // them cross a link the same way (a shared host bridge would then carry several hops at once);
  // otherwise they are plain flows.
  void chain(const std::vector<std::pair<int, int>>& hops, double bytes) {
    if (bytes <= 0 || hops.empty()) return;
    bool distinct = hops.size() >= 3;
    if (distinct) {
      std::vector<char> used(pf_.links().size() * 2, 0);
      for (const auto& [src, dst] : hops)
        for (const auto& h : pf_.route(src, dst)) {
          char& u = used[static_cast<std::size_t>(h.link) * 2 + (h.up ? 0 : 1)];
          if (u) distinct = false;
          u = 1;
        }
    }
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
    for (const auto& [src, dst] : hops) alpha_ = std::max(alpha_, pf_.route_latency(src, dst));
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
    double sum = 0;
    for (const auto& [src, dst] : hops) sum += pf_.route_latency(src, dst);
    if (!hops.empty()) ring_hop_ = std::max(ring_hop_, sum / static_cast<double>(hops.size()));
  }
  LoweredCollective done() {
    end_phase();
    return std::move(out_);
  }

 private:
  const Platform& pf_;
  std::map<std::pair<int, int>, double> current_;
  std::vector<Flow> chained_;
  std::vector<Chain> chains_;
  std::vector<HostWork> work_;
  double alpha_ = 0, extra_ = 0, ring_hop_ = 0;
  LoweredCollective out_;
};

// Members grouped by node, nodes in order of first appearance.
std::vector<std::vector<int>> by_node(const Platform& pf, const std::vector<int>& ranks) {
  std::vector<std::vector<int>> out;
  std::map<int, std::size_t> index;
  for (int g : ranks) {
    auto [it, fresh] = index.try_emplace(pf.node_of(g), out.size());
    if (fresh) out.emplace_back();
    out[it->second].push_back(g);
  }
  return out;
}

int floor_pow2(int p) {
  int q = 1;
  while (q * 2 <= p) q *= 2;
  return q;
}

}  // namespace

namespace {

// NCCL's ring channels over `ranks`: across nodes one per NIC, each entering every node at another
// GPU; each channel the ranks in its ring order.
std::vector<std::vector<int>> ring_orders(const Platform& pf, const std::vector<int>& ranks) {
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  auto nodes = by_node(pf, sorted);
  std::size_t widest = 0;
  for (const auto& m : nodes) widest = std::max(widest, m.size());
  const int channels =
      nodes.size() > 1 && !pf.torus() ? std::max(1, std::min(pf.spec().nics_per_node, static_cast<int>(widest))) : 1;
  std::vector<std::vector<int>> orders;
  for (int c = 0; c < channels; ++c) {
    auto& order = orders.emplace_back();
    for (const auto& members : nodes) {
      const std::size_t n = members.size();
      const std::size_t entry = static_cast<std::size_t>(c) * n / static_cast<std::size_t>(channels);
      for (std::size_t i = 0; i < n; ++i) order.push_back(members[(entry + i) % n]);
    }
  }
  return orders;
}

// The endpoints of one hop of a ring channel.
std::pair<int, int> ring_hop(const Platform& pf, const Builder& b, int from, int to) {
  if (pf.node_of(from) == pf.node_of(to) || pf.torus()) return b.endpoints(from, to);
  // NCCL keeps a channel on one rail: the sending node hands the data to the NIC on the
  // receiving GPU's rail (PXN), so the hop never crosses between rails.
  const int twin = pf.node_of(from) * pf.spec().gpus_per_node + pf.local_of(to);
  return {pf.nic_endpoint(twin), pf.nic_endpoint(to)};
}

}  // namespace

LoweredCollective ring(const Platform& pf, double bytes, const std::vector<int>& ranks, double passes) {
  const int p = static_cast<int>(ranks.size());
  Builder b(pf);
  if (p < 2) return b.done();
  const auto orders = ring_orders(pf, ranks);
  const double per_hop = passes * (p - 1) / p * bytes / static_cast<double>(orders.size());
  for (const auto& order : orders) {
    std::vector<std::pair<int, int>> hops;
    hops.reserve(static_cast<std::size_t>(p));
    for (int i = 0; i < p; ++i)
      hops.push_back(ring_hop(pf, b, order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>((i + 1) % p)]));
    b.chain(hops, per_hop);
    b.ring_hops(hops);
  }
  b.end_phase(passes * (p - 1));
  return b.done();
}

LoweredCollective ring_chain(const Platform& pf, double bytes, const std::vector<int>& ranks, bool toward_root) {
  const int p = static_cast<int>(ranks.size());
  Builder b(pf);
  if (p < 2) return b.done();
  const auto orders = ring_orders(pf, ranks);
  for (const auto& order : orders) {
    // Around the channel's ring from the root (broadcast), or from the rank after it to the root
    // (reduce): the ring's direction either way, p - 1 hops.
    const auto root = static_cast<std::size_t>(std::find(order.begin(), order.end(), ranks.front()) - order.begin());
    const std::size_t first = toward_root ? root + 1 : root;
    std::vector<std::pair<int, int>> hops;
    for (std::size_t i = 0; i + 1 < order.size(); ++i)
      hops.push_back(ring_hop(pf, b, order[(first + i) % order.size()], order[(first + i + 1) % order.size()]));
    b.chain(hops, bytes / static_cast<double>(orders.size()));
    b.ring_hops(hops);
  }
  b.end_phase(p - 1.0);  // pipeline fill: a chunk crosses every hop once
  return b.done();
}

LoweredCollective torus_rings(const Platform& pf, double bytes, const std::vector<int>& ranks, bool scatter, bool gather) {
  Builder b(pf);
  const auto& dims = pf.spec().torus_dims;
  if (ranks.size() < 2) return b.done();
  // One phase per dimension: every line of chips along it runs a bidirectional ring (half the
  // buffer each way round, on both directions of the links) over the share it holds.
  auto phase = [&](int k, double share) {
    const int d = dims[static_cast<std::size_t>(k)];
    if (d < 2) return;
    const double per_hop = (d - 1.0) / d * share / 2;
    for (int g = 0; g < pf.spec().num_gpus(); ++g) {
      if (pf.torus_coord(g, k) != 0) continue;  // one ring per line, from its first chip
      for (int dir : {1, -1}) {
        std::vector<std::pair<int, int>> hops;
        for (int i = 0, at = g; i < d; ++i, at = pf.torus_neighbour(at, k, dir))
          hops.push_back(b.endpoints(at, pf.torus_neighbour(at, k, dir)));
        b.chain(hops, per_hop);
      }
    }
    b.end_phase(d - 1.0);
  };
  const int n = static_cast<int>(dims.size());
  // share[k]: what each chip holds entering dimension k's reduce-scatter, S / (d_0 ... d_{k-1}).
  std::vector<double> share(static_cast<std::size_t>(n), bytes);
  for (int k = 1; k < n; ++k) share[static_cast<std::size_t>(k)] = share[static_cast<std::size_t>(k - 1)] / dims[static_cast<std::size_t>(k - 1)];
  if (scatter)
    for (int k = 0; k < n; ++k) phase(k, share[static_cast<std::size_t>(k)]);
  if (gather)
    for (int k = n - 1; k >= 0; --k) phase(k, share[static_cast<std::size_t>(k)]);
  return b.done();
}

double torus_closed_form(const std::vector<int>& dims, double bytes, double passes, double alpha, double bandwidth) {
  double t = 0, share = bytes;
  for (int d : dims) {
    if (d >= 2) t += passes * ((d - 1.0) / d * share / (2 * bandwidth) + (d - 1) * alpha);
    share /= d;
  }
  return t;
}

LoweredCollective chain(const Platform& pf, double bytes, const std::vector<int>& ranks, bool toward_root) {
  Builder b(pf);
  const std::size_t p = ranks.size();
  for (std::size_t i = 0; i + 1 < p; ++i)
    toward_root ? b.hop(ranks[i + 1], ranks[i], bytes) : b.hop(ranks[i], ranks[i + 1], bytes);
  b.end_phase(static_cast<double>(p) - 1.0);  // pipeline fill: one step per hop
  return b.done();
}

LoweredCollective double_tree(const Platform& pf, double bytes, const std::vector<int>& ranks) {
  Builder b(pf);
  if (ranks.size() < 2) return b.done();
  auto nodes = by_node(pf, ranks);
  std::size_t widest = 0;
  for (const auto& m : nodes) widest = std::max(widest, m.size());
  // As for rings, NCCL runs one tree pair per NIC across nodes, each entering at another GPU.
  const int channels = nodes.size() > 1 ? std::max(1, std::min(pf.spec().nics_per_node, static_cast<int>(widest))) : 1;
  const double share = bytes / (2.0 * channels);
  const int n = static_cast<int>(nodes.size());
  int levels = 0;
  for (int k = 1; k < n; k = 2 * k + 1) ++levels;  // edges from root to deepest leaf: floor(log2 n)
  for (int c = 0; c < channels; ++c)
    for (int tree = 0; tree < 2; ++tree) {
      // A heap over nodes, mirrored for the second tree so that nodes inner in one tree are
      // leaves in the other; inside a node, a chain from the channel's entry GPU.
      auto pos = [&](int i) { return tree == 0 ? i : n - 1 - i; };
      auto order = [&](int node) {
        const auto& m = nodes[static_cast<std::size_t>(node)];
        const std::size_t entry = (static_cast<std::size_t>(c) * m.size() / static_cast<std::size_t>(channels) +
                                   (tree == 0 ? 0 : m.size() / 2)) % m.size();
        std::vector<int> o;
        for (std::size_t i = 0; i < m.size(); ++i) o.push_back(m[(entry + i) % m.size()]);
        return o;
      };
      // The pipelined tree moves in lockstep. Its hops are grouped so that no group crosses a
      // link twice the same way: inside nodes toward and away from the entry; between nodes
      // toward and away from the parent, left and right children apart.
      std::vector<std::vector<std::pair<int, int>>> groups(6);
      for (int i = 0; i < n; ++i) {
        auto mine = order(i);
        for (std::size_t k = 0; k + 1 < mine.size(); ++k) {
          groups[0].push_back(b.endpoints(mine[k + 1], mine[k]));  // reduce toward the entry
          groups[1].push_back(b.endpoints(mine[k], mine[k + 1]));  // broadcast away from it
        }
        const int h = pos(i);  // heap position of node i; pos is its own inverse
        if (h == 0) continue;
        const int parent = order(pos((h - 1) / 2)).front();
        const std::size_t side = h % 2 == 1 ? 0 : 2;
        groups[2 + side].push_back(b.endpoints(mine.front(), parent));
        groups[3 + side].push_back(b.endpoints(parent, mine.front()));
      }
      for (const auto& hops : groups) b.chain(hops, share);
    }
  b.end_phase(2.0 * (levels + static_cast<double>(widest) - 1.0));  // up and down, pipelined
  return b.done();
}

namespace {
// One step of a butterfly: every rank with its partner at distance d, all in lockstep.
template <class Rank>
std::vector<std::pair<int, int>> exchange(const Builder& b, int q, int d, Rank r) {
  std::vector<std::pair<int, int>> hops;
  for (int i = 0; i < q; ++i) hops.push_back(b.endpoints(r(i), r(i ^ d)));
  return hops;
}
}  // namespace

LoweredCollective halving_doubling(const Platform& pf, double bytes, const std::vector<int>& ranks, bool scatter, bool gather) {
  Builder b(pf);
  const int p = static_cast<int>(ranks.size());
  if (p < 2) return b.done();
  const int q = floor_pow2(p), extra = p - q;
  auto r = [&](int i) { return ranks[static_cast<std::size_t>(i)]; };
  for (int i = 0; i < extra; ++i) b.hop(r(q + i), r(i), bytes);  // fold the extra ranks in
  b.end_phase();
  // Halving exchanges S/2 with the nearest partner first, so the largest messages stay inside a
  // node (ranks are in node order); doubling mirrors it.
  if (scatter)
    for (int d = 1, k = 1; d < q; d *= 2, ++k) {
      b.chain(exchange(b, q, d, r), bytes / (1 << k));
      b.end_phase();
    }
  if (gather)
    for (int d = q / 2, k = static_cast<int>(std::log2(q)); d >= 1; d /= 2, --k) {
      b.chain(exchange(b, q, d, r), bytes / (1 << k));
      b.end_phase();
    }
  for (int i = 0; i < extra; ++i) b.hop(r(i), r(q + i), bytes);
  return b.done();
}

LoweredCollective hierarchical(const Platform& pf, double bytes, const std::vector<int>& ranks) {
  auto nodes = by_node(pf, ranks);
  if (nodes.size() < 2) return ring(pf, bytes, ranks, 2.0);
  LoweredCollective out;
  auto append = [&](LoweredCollective part) {
    for (auto& ph : part.phases) out.phases.push_back(std::move(ph));
  };
  auto inside = [&](double passes) {  // one ring per node, all nodes at once
    LoweredCollective all;
    for (const auto& members : nodes) {
      auto one = ring(pf, bytes, members, passes);
      if (all.phases.empty()) all = one;
      else if (!one.phases.empty()) all.phases[0].add(one.phases[0]);
    }
    return all;
  };
  append(inside(1.0));
  std::size_t g = 0;
  for (const auto& m : nodes) g = std::max(g, m.size());
  LoweredCollective across;
  for (std::size_t j = 0; j < g; ++j) {  // local rank j of every node: a ring over S/g
    std::vector<int> peers;
    for (const auto& m : nodes)
      if (j < m.size()) peers.push_back(m[j]);
    auto one = ring(pf, bytes / static_cast<double>(g), peers, 2.0);
    if (across.phases.empty()) across = one;
    else if (!one.phases.empty()) across.phases[0].add(one.phases[0]);
  }
  append(across);
  append(inside(1.0));
  return out;
}

LoweredCollective naive(const Platform& pf, double bytes, const std::vector<int>& ranks) { return direct(pf, bytes, ranks, 1); }

LoweredCollective direct(const Platform& pf, double per_pair, const std::vector<int>& ranks, int repeats) {
  Builder b(pf);
  for (int rep = 0; rep < repeats; ++rep) {
    for (int a : ranks)
      for (int c : ranks) b.hop(a, c, per_pair);
    b.end_phase();
  }
  return b.done();
}

LoweredCollective round_robin(const Platform& pf, double per_pair, const std::vector<int>& ranks, int repeats) {
  Builder b(pf);
  const std::size_t p = ranks.size();
  for (int rep = 0; rep < repeats; ++rep)
    for (std::size_t k = 1; k < p; ++k) {
      for (std::size_t i = 0; i < p; ++i) b.hop(ranks[i], ranks[(i + k) % p], per_pair);
      b.end_phase();
    }
  return b.done();
}

LoweredCollective master_worker(const Platform& pf, double bytes, const std::vector<int>& ranks) {
  Builder b(pf);
  for (std::size_t i = 1; i < ranks.size(); ++i) b.hop(ranks[i], ranks[0], bytes);
  b.end_phase();
  for (std::size_t i = 1; i < ranks.size(); ++i) b.hop(ranks[0], ranks[i], bytes);
  return b.done();
}

LoweredCollective parameter_server(const Platform& pf, double bytes, const std::vector<int>& ranks, int only,
                                   double apply_factor) {
  Builder b(pf);
  const int dedicated = pf.spec().ps_servers;
  const int shards = dedicated > 0 ? dedicated : static_cast<int>(ranks.size());
  const double share = bytes / shards;
  auto shard_of = [&](int k) { return dedicated > 0 ? -1 : ranks[static_cast<std::size_t>(k)]; };
  const std::vector<int> workers = only >= 0 ? std::vector<int>{only} : ranks;
  for (int w : workers)
    for (int k = 0; k < shards; ++k)
      dedicated > 0 ? b.raw(pf.nic_endpoint(w), pf.ps_endpoint(k), share) : b.hop(w, shard_of(k), share);
  // A shard sums the contributions of S/N it receives (read each, write S/N) at host (or HBM) speed.
  // On dedicated servers that is CPU work each server does for every worker's update, so
  // concurrent updates queue for it; an asynchronous update also runs the optimizer there.
  const double bw = dedicated > 0 ? pf.spec().host_memory_bandwidth : 1e12;
  const double passes = only >= 0 && apply_factor > 0 ? apply_factor : static_cast<double>(workers.size()) + 1.0;
  if (dedicated > 0) {
    b.end_phase();
    for (int k = 0; k < shards; ++k) b.host_work(pf.ps_endpoint(k), passes * share / bw);
  } else {
    b.add_latency(passes * share / bw);
  }
  b.end_phase();
  for (int w : workers)
    for (int k = 0; k < shards; ++k)
      dedicated > 0 ? b.raw(pf.ps_endpoint(k), pf.nic_endpoint(w), share) : b.hop(shard_of(k), w, share);
  return b.done();
}

LoweredCollective central_storage(const Platform& pf, double bytes, const std::vector<int>& ranks, int only) {
  Builder b(pf);
  const std::vector<int> gpus = only >= 0 ? std::vector<int>{only} : ranks;
  for (int g : gpus) b.raw(pf.pcie_endpoint(g), pf.host_endpoint(pf.node_of(g)), bytes);
  b.end_phase();
  for (int g : gpus) b.raw(pf.host_endpoint(pf.node_of(g)), pf.pcie_endpoint(g), bytes);
  return b.done();
}

LoweredCollective binomial(const Platform& pf, double bytes, const std::vector<int>& ranks, bool toward_root) {
  Builder b(pf);
  const int p = static_cast<int>(ranks.size());
  std::vector<int> spans;
  for (int d = 1; d < p; d *= 2) spans.push_back(d);
  if (toward_root) std::reverse(spans.begin(), spans.end());
  for (int d : spans) {
    for (int i = 0; i < d && i + d < p; ++i)
      toward_root ? b.hop(ranks[static_cast<std::size_t>(i + d)], ranks[static_cast<std::size_t>(i)], bytes)
                  : b.hop(ranks[static_cast<std::size_t>(i)], ranks[static_cast<std::size_t>(i + d)], bytes);
    b.end_phase();
  }
  return b.done();
}

}  // namespace dtsim::network::algorithms
