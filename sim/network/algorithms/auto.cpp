// `auto`: NCCL's tuner's choice, made per collective by collectives.cpp (resolve); this unit has
// no lowering of its own, only the bound on what it may pick.
#include "sim/network/algorithm_registry.hpp"

namespace dtsim::network::algorithms {

namespace {
using taskgraph::CollectiveOp;
// An all-reduce lowers ring, tree and hierarchical and runs one: at most the tree's flows. A
// reduce-scatter, all-gather, broadcast or reduce runs the ring, an all-to-all the direct one.
std::optional<FlowCount> count_auto(CollectiveOp op, const FlowShape& s) {
  if (op == CollectiveOp::AllReduce) return double_tree_flows(s.p, s.channels);
  if (op == CollectiveOp::AllToAll) return direct_flows(s.p, 1);
  if (op == CollectiveOp::SendRecv) return std::nullopt;
  return ring_flows(s.p, s.channels);
}
}  // namespace

AlgorithmUnit auto_unit() {
  return {.name = "auto", .doc = "as NCCL's tuner picks per collective: ring, tree or hierarchical by the network model",
          .flows = count_auto, .scatter_gather = true};
}

}  // namespace dtsim::network::algorithms
