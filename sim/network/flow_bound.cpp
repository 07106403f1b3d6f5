#include <algorithm>
#include <cmath>

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
  const double log2p = std::ceil(std::log2(p));
  auto set = [&](double flows, double widest, bool chained) {
    b.flows = flows * groups;
    b.widest = widest * groups;
    b.chained = chained;
  };
  const bool reduces = op == CollectiveOp::AllReduce;
  switch (op) {
    case CollectiveOp::SendRecv: set(1, 1, false); return b;
    case CollectiveOp::Broadcast:
    case CollectiveOp::Reduce:  // a binomial tree, or a chain per ring channel: p - 1 hops each
      if (a == Algorithm::Tree) set(p, p, false);
      else set(channels * p, channels * p, true);
      return b;
    case CollectiveOp::AllToAll:
      if (a == Algorithm::RoundRobin) set(p * p, p, false);
      else set(p * p, p * p, false);  // direct, also what Auto picks
      return b;
    default: break;
  }
  const double passes = reduces ? 2.0 : 1.0;  // all-reduce = reduce-scatter + all-gather
  switch (a) {
    case Algorithm::Ring: set(channels * p, channels * p, true); break;
    case Algorithm::Tree: set(4 * channels * p, 4 * channels * p, true); break;
    case Algorithm::HalvingDoubling: set(passes * p * (log2p + 1), p, true); break;
    case Algorithm::Hierarchical: set(3 * p, 2 * p, true); break;
    case Algorithm::Direct: set(passes * p * p, p * p, false); break;
    case Algorithm::Naive: set(p * p, p * p, false); break;
    case Algorithm::RoundRobin: set(passes * p * p, p, false); break;
    case Algorithm::MasterWorker: set(2 * p, p, false); break;
    case Algorithm::ParameterServer: {
      const double shards = c.ps_servers > 0 ? c.ps_servers : p;
      set(2 * p * shards, p * shards, false);
      break;
    }
    case Algorithm::CentralStorage: set(2 * p, p, false); break;
    case Algorithm::Auto:
      // Lowers ring, tree and hierarchical to pick one (all-reduce) and runs that one: at most the
      // tree's flows. Other operations use the ring.
      if (reduces) set(4 * channels * p, 4 * channels * p, true);
      else set(channels * p, channels * p, true);
      break;
  }
  // On NVLink SHARP nodes NCCL may run these through the switches instead (nvls.cpp), lowered in
  // place of the ring.
  // Each GPU to and from its switch, plus across nodes a ring per local rank (p hops in all).
  const double nvls_flows = (spans ? 3 : 2) * p;
  if ((a == Algorithm::Ring || a == Algorithm::Auto) && runs_nvls(c, op, p, per_node, bytes)) {
    if (bytes > 0) {
      set(nvls_flows, nvls_flows, false);
    } else {  // size unknown: either
      b.flows = std::max(b.flows, nvls_flows * groups);
      b.widest = std::max(b.widest, nvls_flows * groups);
    }
  }
  // On a torus a ring over every chip runs dimension by dimension (torus_rings): per pass and
  // dimension, every line of chips sends both ways round, 2 p hops.
  if (!c.torus_dims.empty() && (a == Algorithm::Ring || a == Algorithm::Auto)) {
    const double dims = static_cast<double>(c.torus_dims.size());
    b.flows += passes * dims * 2 * p * groups;
    b.widest = std::max(b.widest, 2 * p * groups);
  }
  return b;
}

}  // namespace dtsim::network
