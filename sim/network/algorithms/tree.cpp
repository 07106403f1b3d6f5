// NCCL's double binary tree and the binomial tree of rooted operations.
#include "sim/network/algorithm_registry.hpp"
#include "sim/network/algorithms/builder.hpp"

namespace dtsim::network::algorithms {

using namespace detail;

LoweredCollective double_tree(const Platform& pf, double bytes, const std::vector<int>& ranks) {
  Builder b(pf);
  if (ranks.size() < 2) return b.done();
  auto nodes = by_node(pf, ranks);
  std::size_t widest = 0;
  for (const auto m : nodes) widest = std::max(widest, m.size());
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
      auto entry = [&](int node) {
        const auto m = nodes[static_cast<std::size_t>(node)];
        return (static_cast<std::size_t>(c) * m.size() / static_cast<std::size_t>(channels) + (tree == 0 ? 0 : m.size() / 2)) %
               m.size();
      };
      auto order = [&](int node, std::vector<int>& o) {
        const auto m = nodes[static_cast<std::size_t>(node)];
        const std::size_t first = entry(node);
        o.clear();
        for (std::size_t i = 0; i < m.size(); ++i) o.push_back(m[(first + i) % m.size()]);
      };
      auto head = [&](int node) { return nodes[static_cast<std::size_t>(node)][entry(node)]; };  // order(node).front()
      // The pipelined tree moves in lockstep. Its hops are grouped so that no group crosses a
      // link twice the same way: inside nodes toward and away from the entry; between nodes
      // toward and away from the parent, left and right children apart.
      std::vector<std::vector<std::pair<int, int>>> groups(6);
      std::vector<int> mine;
      for (int i = 0; i < n; ++i) {
        order(i, mine);
        for (std::size_t k = 0; k + 1 < mine.size(); ++k) {
          groups[0].push_back(b.endpoints(mine[k + 1], mine[k]));  // reduce toward the entry
          groups[1].push_back(b.endpoints(mine[k], mine[k + 1]));  // broadcast away from it
        }
        const int h = pos(i);  // heap position of node i; pos is its own inverse
        if (h == 0) continue;
        const int parent = head(pos((h - 1) / 2));
        const std::size_t side = h % 2 == 1 ? 0 : 2;
        groups[2 + side].push_back(b.endpoints(mine.front(), parent));
        groups[3 + side].push_back(b.endpoints(parent, mine.front()));
      }
      for (const auto& hops : groups) b.chain(hops, share);
    }
  b.end_phase(2.0 * (levels + static_cast<double>(widest) - 1.0));  // up and down, pipelined
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

// Two trees, each reducing and broadcasting: four chains per channel.
FlowCount double_tree_flows(double p, double channels) { return {4 * channels * p, 4 * channels * p, true}; }
// One flow per edge.
FlowCount binomial_flows(double p) { return {p, p, false}; }

namespace {
using taskgraph::CollectiveOp;
std::optional<LoweredCollective> lower_tree(const Platform& pf, CollectiveOp op, double bytes, const std::vector<int>& r) {
  if (op == CollectiveOp::AllReduce) return double_tree(pf, bytes, r);
  if (op == CollectiveOp::Broadcast || op == CollectiveOp::Reduce) return binomial(pf, bytes, r, op == CollectiveOp::Reduce);
  return std::nullopt;
}
std::optional<FlowCount> count_tree(CollectiveOp op, const FlowShape& s) {
  if (op == CollectiveOp::AllReduce) return double_tree_flows(s.p, s.channels);
  if (op == CollectiveOp::Broadcast || op == CollectiveOp::Reduce) return binomial_flows(s.p);
  return std::nullopt;
}
}  // namespace

AlgorithmUnit tree_unit() {
  return {.name = "tree", .doc = "NCCL's double binary tree (all-reduce); a binomial tree for broadcast and reduce",
          .lower = lower_tree, .flows = count_tree, .linear = true};
}

}  // namespace dtsim::network::algorithms
