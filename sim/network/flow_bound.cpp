#include <algorithm>
#include <cmath>

#include "sim/network/algorithm_registry.hpp"
#include "sim/network/algorithms.hpp"
#include "sim/network/collectives.hpp"

namespace dtsim::network {

using taskgraph::Algorithm;
using taskgraph::CollectiveOp;

namespace {

// Whether NCCL's model runs this collective as NVLS or an NVLS tree (collectives.cpp's choice,
// from the group's shape alone: `p` ranks, `per_node` of them on each node); with `bytes` 0, at
// any size (each choice holds over one range of sizes, the lower envelope of lines: sampled at
// four sizes per octave from 1 B to 1 TiB).
bool runs_nvls(const ClusterSpec& c, CollectiveOp op, double p, double per_node, double bytes) {
  if (!c.intra_nvls || c.nccl_gpu == nccl::Gpu::None || !c.inter_efficiency_points.empty() || per_node < 1 ||
      (op != CollectiveOp::AllReduce && op != CollectiveOp::AllGather && op != CollectiveOp::ReduceScatter))
    return false;
  const auto s = nccl_setup(c, static_cast<int>(p), static_cast<int>(std::ceil(p / per_node)), static_cast<int>(per_node));
  auto nvls_at = [&](double size) {
    const auto pick = nccl::predict(s, op, size).algo;
    return pick == nccl::Algo::Nvls || pick == nccl::Algo::NvlsTree;
  };
  if (bytes > 0) return nvls_at(bytes);
  for (int k = 0; k <= 160; ++k)
    if (nvls_at(std::exp2(k / 4.0))) return true;
  return false;
}

}  // namespace

FlowBound flow_bound(const ClusterSpec& c, CollectiveOp op, Algorithm a, double p, double groups, double per_node,
                     double bytes) {
  FlowBound b;
  if (p < 2 || groups <= 0) return b;
  // Rings and trees run one channel per NIC once a group leaves its node (algorithms.cpp).
  const bool spans = p > per_node;
  const double channels = spans ? std::max(1.0, std::min<double>(c.nics_per_node, per_node)) : 1.0;
  auto set = [&](algorithms::FlowCount n) {
    b.flows = n.flows * groups;
    b.widest = n.widest * groups;
    b.chained = n.chained;
  };
  const bool reduces = op == CollectiveOp::AllReduce;
  namespace al = algorithms;
  if (op == CollectiveOp::SendRecv) {  // every algorithm's is one flow
    set({1, 1, false});
    return b;
  }
  const AlgorithmUnit& unit = unit_of(a);
  const FlowShape shape{p, channels, &c};
  auto count = unit.flows(op, shape);
  // What the algorithm does not implement is refused when lowered; until then it counts as the
  // ring's chains, a direct all-to-all or its own all-reduce.
  if (!count && (op == CollectiveOp::Broadcast || op == CollectiveOp::Reduce)) count = al::ring_flows(p, channels);
  if (!count && op == CollectiveOp::AllToAll) count = al::direct_flows(p, 1);
  if (!count) count = unit.flows(CollectiveOp::AllReduce, shape);
  set(count.value_or(al::ring_flows(p, channels)));
  if (op != CollectiveOp::AllReduce && op != CollectiveOp::ReduceScatter && op != CollectiveOp::AllGather) return b;
  const double passes = reduces ? 2.0 : 1.0;  // all-reduce = reduce-scatter + all-gather
  // On NVLink SHARP nodes NCCL may run these through the switches instead (nvls.cpp), lowered in
  // place of the ring.
  if ((a == Algorithm::Ring || a == Algorithm::Auto) && runs_nvls(c, op, p, per_node, bytes)) {
    const auto n = al::nvls_flows(p, spans);
    if (bytes > 0) {
      set(n);
    } else {  // size unknown: either
      b.flows = std::max(b.flows, n.flows * groups);
      b.widest = std::max(b.widest, n.widest * groups);
    }
  }
  // On a torus a ring over every chip runs dimension by dimension (torus_rings).
  if (!c.torus_dims.empty() && (a == Algorithm::Ring || a == Algorithm::Auto)) {
    const auto t = al::torus_flows(p, static_cast<double>(c.torus_dims.size()), passes);
    b.flows += t.flows * groups;
    b.widest = std::max(b.widest, t.widest * groups);
  }
  return b;
}

}  // namespace dtsim::network
