#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "sim/network/nccl_tables.hpp"
#include "sim/taskgraph/task_graph.hpp"

// NCCL's model of groups inside one NVSwitch node and of NVLink SHARP (NVLS): the graphs its
// topology search builds there and the NVLS and NVLS-tree rows of ncclTopoTuneModel. Line numbers
// are those of NVIDIA/nccl commit 5067397c (v2.30.7).
namespace dtsim::network::nccl {

using taskgraph::CollectiveOp;

namespace {

// nvlsEfficiency, src/graph/tuning.cc lines 139-144: none before Hopper.
constexpr double kNvlsEfficiency[4] = {0.0, 0.0, 0.85, 0.74};
// perChMaxNVLSTreeBws, lines 206-211, [generation][1 node, 2 nodes, more].
constexpr double kNvlsTreePerChannel[4][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {0.0, 57.7, 45.5}, {0.0, 96.0, 80.0}};
// hwLatencies, Simple: NVLink for NVLS and NVLS tree (line 161), network for NVLS tree (173) and,
// with one GPU per node, the tree's (171); NVLS's baseLatencies are 0 (line 153).
constexpr double kNvlsNvlinkLatency = 25.0;
constexpr double kNvlsTreeNetLatency = 20.9, kTreeSimpleNetLatency = 14.0;
// NCCL_MAX_NVLS_ARITY, src/include/device.h line 213: NVLS channels are GPUs pulling from the
// switch, at most this many.
constexpr int kMaxNvlsArity = 32;

int ppn(const Setup& s) { return s.ranks / s.nodes; }

}  // namespace

// NCCL's NVLink speed per link, src/graph/topo.h lines 20-24 (SM70/SM80 20.0, SM90 20.6, SM100
// 40.1 GB/s), times the GPU's links; NCCL merges a GPU's links to the NVSwitch into one.
double nvlink_bandwidth(const Setup& s) {
  constexpr double kPerLink[4] = {20.0, 20.0, 20.6, 40.1};
  return s.nvlinks * kPerLink[gen(s.gpu)];
}

// A ring inside one node (search.cc lines 1152-1174, 1186-1261): from the first intra speed the
// GPU's NVLink carries, the search tries slower ones while they stay above 0.49 of the best so far,
// keeping the graph whose channels x speed is largest (as many channels as fit: each crosses
// every GPU's link once each way); then ncclTopoDupChannels.
Graph intra_ring_graph(const Setup& s) {
  const double n = nvlink_bandwidth(s);
  const auto v = speeds(s.gpu, true);
  Graph best{0, 0, 0};
  for (double x : v) {
    if (x > n) continue;
    if (best.channels > 0 && x / best.intra <= 0.49) break;
    const int c = static_cast<int>(std::floor(n / x + 1e-9));
    if (c * x > best.channels * best.intra) best = Graph{c, x, x};
  }
  if (best.channels == 0) best = Graph{1, v.back(), v.back()};
  best = dup_channels(s.gpu, best);
  best.inter = best.intra;
  return best;
}

// The NVLS graph (search.cc lines 1124-1139, 410-440, 1268-1280): one channel per GPU up to the
// arity (a single node insists on all of them); every GPU moves the channel's speed to and from
// the switch, the channel's head twice, so a GPU's NVLink must carry channels + 1 speeds. Across
// nodes the search walks the network speeds, no faster than the NIC; then its second pass raises
// the inter-node speed while it stays below twice the intra speed and the NIC carries it (a single
// node has no NIC, so only the first bound holds).
Graph nvls_graph(const Setup& s) {
  const double n = nvlink_bandwidth(s);
  const bool one_node = s.nodes == 1;
  Graph g{std::min(kMaxNvlsArity, ppn(s)), 0, 0};
  // Channels share the node's NICs (each head reaches the network through one).
  const double nic = one_node ? std::numeric_limits<double>::infinity()
                              : s.nic_GBps / std::ceil(static_cast<double>(g.channels) / s.nics);
  const auto v = speeds(s.gpu, one_node);
  std::size_t i = 0;
  while (i + 1 < v.size() && (v[i] > nic || (g.channels + 1) * v[i] > n + 1e-9)) ++i;
  g.intra = g.inter = v[i];
  while (i > 0 && g.inter < 2 * g.intra && v[i - 1] <= nic) g.inter = v[--i];
  return g;
}

// tuning.cc lines 301-322 (bandwidth), 377-382 (algorithm bandwidth), 424-428 (latency), 501-506
// (NVLS trees need nodes, NVLS across nodes needs CollNet), 353-375 (NVLS all-gather and
// reduce-scatter across nodes need CollNet too) and 643-646 (Blackwell's NVLS trees on x86 hosts
// take the trees' correction by size).
Prediction nvls_cost(const Setup& s, CollectiveOp op, Algo a, double bytes) {
  Prediction out{a, Proto::Simple};
  const bool all_reduce = op == CollectiveOp::AllReduce, one_node = s.nodes == 1;
  const int g = gen(s.gpu), col = one_node ? 0 : s.nodes <= 2 ? 1 : 2;
  const double eff = kNvlsEfficiency[g];
  if (!s.nvls || !s.nvlink || eff == 0 || (a == Algo::NvlsTree && (one_node || !all_reduce)) || (a == Algo::Nvls && !one_node))
    return out;
  const Graph gr = nvls_graph(s);
  if (gr.channels < 2) return out;
  const double p = ppn(s);
  // An all-reduce pipelines its reduction and its multicast: twice the per-channel bandwidth.
  double intra = gr.intra * eff * (gr.channels - 1) / gr.channels * (all_reduce ? 2.0 : (p - 1) / p);
  double inter = gr.inter * (a == Algo::NvlsTree && s.nodes <= 2 ? 2 : 1);
  double bw = std::min(intra, inter);
  if (a == Algo::NvlsTree) bw = std::min(bw, kNvlsTreePerChannel[g][col]);
  bw *= gr.channels;
  if (all_reduce) bw *= static_cast<double>(s.ranks) / (2 * (s.ranks - 1));
  double lat = kNvlsNvlinkLatency;
  if (a == Algo::NvlsTree) lat += 2 * floor_log2(s.nodes) * (p == 1 ? kTreeSimpleNetLatency : kNvlsTreeNetLatency);
  const int log_size = floor_log2(std::floor(bytes / 64));
  if (a == Algo::NvlsTree && s.gpu >= Gpu::Blackwell && s.cpu != Cpu::Arm && log_size >= 0 && log_size < 24)
    bw *= kTreeCorrection[static_cast<int>(Proto::Simple)][log_size];
  out.latency_us = lat;
  out.bandwidth_GBps = bw;
  out.time_us = lat + bytes / (1000 * bw);
  return out;
}

}  // namespace dtsim::network::nccl
