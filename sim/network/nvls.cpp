#include <algorithm>
#include <cmath>
#include <map>

#include "sim/network/algorithms.hpp"

// NVLink SHARP: the node's NVSwitch reduces what its GPUs send and multicasts the result, so the
// traffic goes between each GPU and the switch, not from GPU to GPU.
namespace dtsim::network::algorithms {

namespace {

// What each GPU sends to the switch and receives from it, per byte of the buffer S, on p GPUs.
// NCCL's NVLS all-reduce (src/device/all_reduce.h, runRing of ncclFuncAllReduce/NVLS): GPU j
// reduces shard j in the switch (multimem.ld_reduce: every GPU's link carries its copy of
// shard j up, S in all, and shard j comes down to j, S/p) and stores it with multimem.st (S/p
// up, and every shard comes down to every GPU, S). Reduce-scatter is the first half, all-gather
// the second.
std::pair<double, double> up_down(taskgraph::CollectiveOp op, double p) {
  using taskgraph::CollectiveOp;
  if (op == CollectiveOp::ReduceScatter) return {1.0, 1.0 / p};
  if (op == CollectiveOp::AllGather) return {1.0 / p, 1.0};
  return {1.0 + 1.0 / p, 1.0 / p + 1.0};
}

}  // namespace

LoweredCollective nvls(const Platform& pf, taskgraph::CollectiveOp op, double bytes, const std::vector<int>& ranks) {
  LoweredCollective out;
  if (ranks.size() < 2 || bytes <= 0) return out;
  std::map<int, std::vector<int>> nodes;
  for (int g : ranks) nodes[pf.node_of(g)].push_back(g);
  std::size_t ppn = 0;
  for (const auto& [n, m] : nodes) ppn = std::max(ppn, m.size());
  Phase& ph = out.phases.emplace_back();
  const auto [up, down] = up_down(op, static_cast<double>(ppn));
  double route = 0;
  for (const auto& [n, members] : nodes) {
    const int sw = pf.switch_endpoint(n);
    for (int g : members) {
      ph.flows.push_back({pf.fabric_endpoint(g), sw, up * bytes});
      ph.flows.push_back({sw, pf.fabric_endpoint(g), down * bytes});
      route = std::max(route, pf.route_latency(pf.fabric_endpoint(g), sw));
    }
  }
  // The switch is reached twice per chunk in an all-reduce (reduce, then multicast), once in the
  // others; each visit is a GPU-to-GPU latency, of which the flows pay their route's.
  const double visits = op == taskgraph::CollectiveOp::AllReduce ? 2.0 : 1.0;
  ph.latency = std::max(0.0, visits * pf.spec().intra_latency - route);
  if (nodes.size() < 2) return out;
  // Across nodes (NCCL's NVLS tree, an all-reduce only): local rank j of every node all-reduces
  // its 1/ppn share over its own NIC while the switches reduce and multicast the next chunks, so
  // the whole runs as one pipelined phase. The share moves as a ring over the nodes (per NIC
  // 2 (N-1)/N of it each way, as a tree's 2 nodes do exactly); the latency is the tree's: up and
  // down log2 N levels, each a NIC-to-NIC hop.
  double nic_route = 0;
  for (std::size_t j = 0; j < ppn; ++j) {
    std::vector<int> peers;
    for (const auto& [n, m] : nodes)
      if (j < m.size()) peers.push_back(m[j]);
    if (peers.size() < 2) continue;
    auto across = ring(pf, bytes / static_cast<double>(ppn), peers, 2.0);
    for (const auto& f : across.all_flows()) nic_route = std::max(nic_route, pf.route_latency(f.src, f.dst));
    const double latency = ph.latency;
    ph.add(across.phases.front());
    ph.latency = latency;
  }
  const double levels = std::ceil(std::log2(static_cast<double>(nodes.size())));
  ph.latency = std::max(ph.latency, (2 * levels - 1) * nic_route);
  return out;
}

// Each GPU to and from its switch, plus across nodes a ring per local rank (p hops in all).
FlowCount nvls_flows(double p, bool spans_nodes) {
  const double n = (spans_nodes ? 3 : 2) * p;
  return {n, n, false};
}

}  // namespace dtsim::network::algorithms
