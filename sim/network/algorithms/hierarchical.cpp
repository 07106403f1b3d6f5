// Reduce-scatter inside each node, all-reduce across nodes, all-gather inside.
#include "sim/network/algorithm_registry.hpp"
#include "sim/network/algorithms/builder.hpp"

namespace dtsim::network::algorithms {

using namespace detail;

LoweredCollective hierarchical(const Platform& pf, double bytes, const std::vector<int>& ranks) {
  auto nodes = by_node(pf, ranks);
  if (nodes.size() < 2) return ring(pf, bytes, ranks, 2.0);
  LoweredCollective out;
  auto append = [&](LoweredCollective part) {
    for (auto& ph : part.phases) out.phases.push_back(std::move(ph));
  };
  auto inside = [&](double passes) {  // one ring per node, all nodes at once
    LoweredCollective all;
    for (const auto members : nodes) {
      if (members.size() < 2) continue;  // nothing to move (ring() would lower nothing)
      auto one = ring(pf, bytes, std::vector<int>(members.begin(), members.end()), passes);
      if (all.phases.empty()) all = one;
      else if (!one.phases.empty()) all.phases[0].add(one.phases[0]);
    }
    return all;
  };
  // The all-gather inside moves what the reduce-scatter moved, the same way: lowered once.
  const LoweredCollective within = inside(1.0);
  append(within);
  std::size_t g = 0;
  for (const auto m : nodes) g = std::max(g, m.size());
  LoweredCollective across;
  for (std::size_t j = 0; j < g; ++j) {  // local rank j of every node: a ring over S/g
    std::vector<int> peers;
    for (const auto m : nodes)
      if (j < m.size()) peers.push_back(m[j]);
    auto one = ring(pf, bytes / static_cast<double>(g), peers, 2.0);
    if (across.phases.empty()) across = one;
    else if (!one.phases.empty()) across.phases[0].add(one.phases[0]);
  }
  append(across);
  append(within);
  return out;
}

// A reduce-scatter and an all-gather inside each node, an all-reduce across.
FlowCount hierarchical_flows(double p) { return {3 * p, 2 * p, true}; }

namespace {
using taskgraph::CollectiveOp;
std::optional<LoweredCollective> lower_hierarchical(const Platform& pf, CollectiveOp op, double bytes, const std::vector<int>& r) {
  if (op == CollectiveOp::AllReduce) return hierarchical(pf, bytes, r);
  return std::nullopt;
}
std::optional<FlowCount> count_hierarchical(CollectiveOp op, const FlowShape& s) {
  if (op == CollectiveOp::AllReduce) return hierarchical_flows(s.p);
  return std::nullopt;
}
}  // namespace

AlgorithmUnit hierarchical_unit() {
  return {.name = "hierarchical", .doc = "all-reduce: reduce-scatter inside each node, all-reduce across nodes, all-gather inside",
          .lower = lower_hierarchical, .flows = count_hierarchical, .linear = true};
}

}  // namespace dtsim::network::algorithms
