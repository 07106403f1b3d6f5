// NCCL's rings: all-reduce, reduce-scatter and all-gather, the ring channels' broadcast and reduce chains, and a send-receive chain.
#include "sim/network/algorithm_registry.hpp"
#include "sim/network/algorithms/builder.hpp"

namespace dtsim::network::algorithms {

using namespace detail;

LoweredCollective ring(const Platform& pf, double bytes, const std::vector<int>& ranks, double passes) {
  const int p = static_cast<int>(ranks.size());
  Builder b(pf);
  if (p < 2) return b.done();
  std::vector<std::vector<int>> own;
  const auto& orders = known_ring_orders(pf, ranks, own);
  const double per_hop = passes * (p - 1) / p * bytes / static_cast<double>(orders.size());
  for (const auto& order : orders) {
    std::vector<std::pair<int, int>> hops;
    hops.reserve(static_cast<std::size_t>(p));
    for (int i = 0; i < p; ++i)
      hops.push_back(ring_hop(pf, b, order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>((i + 1) % p)]));
    b.ring(hops, per_hop);
  }
  b.end_phase(passes * (p - 1));
  return b.done();
}

LoweredCollective ring_chain(const Platform& pf, double bytes, const std::vector<int>& ranks, bool toward_root) {
  const int p = static_cast<int>(ranks.size());
  Builder b(pf);
  if (p < 2) return b.done();
  std::vector<std::vector<int>> own;
  const auto& orders = known_ring_orders(pf, ranks, own);
  for (const auto& order : orders) {
    // Around the channel's ring from the root (broadcast), or from the rank after it to the root
    // (reduce): the ring's direction either way, p - 1 hops.
    const auto root = static_cast<std::size_t>(std::find(order.begin(), order.end(), ranks.front()) - order.begin());
    const std::size_t first = toward_root ? root + 1 : root;
    std::vector<std::pair<int, int>> hops;
    for (std::size_t i = 0; i + 1 < order.size(); ++i)
      hops.push_back(ring_hop(pf, b, order[(first + i) % order.size()], order[(first + i + 1) % order.size()]));
    b.ring(hops, bytes / static_cast<double>(orders.size()));
  }
  b.end_phase(p - 1.0);  // pipeline fill: a chunk crosses every hop once
  return b.done();
}


LoweredCollective chain(const Platform& pf, double bytes, const std::vector<int>& ranks, bool toward_root) {
  Builder b(pf);
  const std::size_t p = ranks.size();
  for (std::size_t i = 0; i + 1 < p; ++i)
    toward_root ? b.hop(ranks[i + 1], ranks[i], bytes) : b.hop(ranks[i], ranks[i + 1], bytes);
  b.end_phase(static_cast<double>(p) - 1.0);  // pipeline fill: one step per hop
  return b.done();
}

// Each channel: one flow per rank, chained hop to hop.
FlowCount ring_flows(double p, double channels) { return {channels * p, channels * p, true}; }

namespace {
using taskgraph::CollectiveOp;
std::optional<LoweredCollective> lower_ring(const Platform& pf, CollectiveOp op, double bytes, const std::vector<int>& r) {
  switch (op) {
    case CollectiveOp::AllReduce: return ring(pf, bytes, r, 2.0);
    case CollectiveOp::ReduceScatter:
    case CollectiveOp::AllGather: return ring(pf, bytes, r, 1.0);
    case CollectiveOp::Broadcast:
    case CollectiveOp::Reduce: return ring_chain(pf, bytes, r, op == CollectiveOp::Reduce);
    default: return std::nullopt;
  }
}
std::optional<FlowCount> count_ring(CollectiveOp op, const FlowShape& s) {
  if (op == CollectiveOp::AllToAll || op == CollectiveOp::SendRecv) return std::nullopt;
  return ring_flows(s.p, s.channels);
}
}  // namespace

AlgorithmUnit ring_unit() {
  return {.name = "ring", .doc = "NCCL's rings, one channel per NIC across nodes; broadcast and reduce as pipelined chains",
          .lower = lower_ring, .flows = count_ring, .scatter_gather = true, .linear = true};
}

}  // namespace dtsim::network::algorithms
