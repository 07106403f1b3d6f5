#include "sim/network/nccl_tuning.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <stdexcept>

#include "sim/network/nccl_tables.hpp"
#include "sim/taskgraph/task_graph.hpp"

// Line numbers are those of NVIDIA/nccl commit 5067397c (v2.30.7).
namespace dtsim::network::nccl {

using taskgraph::CollectiveOp;

namespace {

// Indexed [algo][proto] with algo Tree, Ring, Pat and proto LL, LL128, Simple; microseconds.
// tuning.cc lines 151 and 154 (baseLatencies), 159, 165 and 171 (hwLatencies NVLINK, PCI, NET).
constexpr double kBaseLatency[3][3] = {{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {8.0, 8.0, 8.0}};
constexpr double kNvlinkLatency[3][3] = {{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}, {0, 0, 4.0}};
constexpr double kPciLatency[3][3] = {{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}, {0, 0, 4.0}};
constexpr double kNetLatency[3][3] = {{5.0, 8.5, 14}, {2.7, 4.0, 14.0}, {0, 0, 14}};

// Indexed [gpu generation Volta..Blackwell][1 node, 2 nodes, more]; GB/s. tuning.cc lines 186-189
// (perChMaxRingLL128Bws), 193-196 (perChMaxTreeLL128Bws), 200-203 (perChMaxTreeBws).
constexpr double kRingLL128PerChannel[4][3] = {
    {20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 36.7}, {40.0, 40.0, 40.0}};
constexpr double kTreeLL128PerChannel[4][3] = {
    {20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}};
constexpr double kTreePerChannel[4][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}};
// The LL protocol's bandwidth ceiling (llMaxBws, lines 178-182): inside one node by GPU
// generation (the N1 column), across nodes by host CPU (AMD, else Intel's row, which other CPUs
// also get), read at lines 269-272.
constexpr double kLLMaxOneNode[4] = {39.0, 87.7, 141.0, 2 * 141.0};
constexpr double kLLMaxIntel[2] = {39.0, 20.4};
constexpr double kLLMaxAmd[2] = {22.5, 19.0};

// What the search builds across nodes: one channel per NIC at channel_speed, doubled at half the
// speed when the speed is high enough (ncclTopoDupChannels, search.cc lines 1036-1049).
Graph graph(const Setup& s) {
  Graph g{s.nics, channel_speed(s.gpu, s.nic_GBps), 0};
  g = dup_channels(s.gpu, g);
  g.inter = g.intra;
  return g;
}

}  // namespace

int gen(Gpu g) {
  if (g == Gpu::None) throw std::invalid_argument("NCCL's model needs a GPU generation");
  return static_cast<int>(g) - 1;
}

int floor_log2(double x) { return x >= 1 ? static_cast<int>(std::floor(std::log2(x))) : -1; }

Graph dup_channels(Gpu gpu, Graph g) {
  const bool keep = g.intra < 25.0 || (gpu >= Gpu::Hopper && g.intra < 50.0 && g.channels > 4);
  if (!keep) g.channels *= 2, g.intra /= 2;
  return g;
}

const char* to_string(Algo a) {
  switch (a) {
    case Algo::Tree: return "tree";
    case Algo::Ring: return "ring";
    case Algo::Pat: return "pat";
    case Algo::Nvls: return "nvls";
    case Algo::NvlsTree: return "nvls_tree";
  }
  return "?";
}
const char* to_string(Proto p) { return p == Proto::LL ? "LL" : p == Proto::LL128 ? "LL128" : "Simple"; }

std::span<const double> speeds(Gpu gpu, bool intra) {
  if (gpu >= Gpu::Blackwell) return intra ? std::span<const double>(kSpeedsIntraSm100) : kSpeedsSm100;
  if (gpu == Gpu::Hopper) return intra ? std::span<const double>(kSpeedsIntraSm90) : kSpeedsSm90;
  return intra ? std::span<const double>(kSpeedsIntra) : kSpeeds;
}

double channel_speed(Gpu gpu, double nic_GBps) {
  const auto v = speeds(gpu, false);
  for (double x : v)
    if (x <= nic_GBps) return x;
  return v.back();
}

Prediction cost(const Setup& s, CollectiveOp op, Algo a, Proto p, double bytes) {
  if (s.nodes < 1 || (s.nodes < 2 && !s.nvls) || s.ranks < s.nodes || s.nics < 1)
    throw std::invalid_argument("NCCL's model here is for a group across nodes, or inside an NVLS node");
  const bool all_reduce = op == CollectiveOp::AllReduce;
  if (!all_reduce && op != CollectiveOp::AllGather && op != CollectiveOp::ReduceScatter)
    throw std::invalid_argument("NCCL's model here covers all-reduce, all-gather and reduce-scatter");
  if (a == Algo::Nvls || a == Algo::NvlsTree) {
    if (p != Proto::Simple) return Prediction{a, p};  // NVLS runs Simple only (line 301)
    return nvls_cost(s, op, a, bytes);
  }
  Prediction out{a, p};
  const bool one_node = s.nodes == 1;
  const int g = gen(s.gpu), col = one_node ? 0 : s.nodes <= 2 ? 1 : 2, ai = static_cast<int>(a), pi = static_cast<int>(p);
  const int ppn = s.ranks / s.nodes;
  // Tree only reduces; PAT only gathers or scatters, one GPU per node, Simple only (lines
  // 297-307 and ncclPatEnable, lines 216-223).
  if ((a == Algo::Tree && !all_reduce) || (a == Algo::Pat && (all_reduce || p != Proto::Simple || s.ranks != s.nodes)))
    return out;
  // Inside one node the search runs at NVLink speeds; across nodes at the NICs'.
  const Graph gr = one_node ? intra_ring_graph(s) : graph(s);
  const double ll_max = one_node ? kLLMaxOneNode[g] : (s.cpu == Cpu::Amd ? kLLMaxAmd : kLLMaxIntel)[col - 1];
  const int nsteps = all_reduce ? 2 * (s.ranks - 1) : s.ranks - 1;

  // Bus bandwidth, then the refinements of lines 324-337, then algorithm bandwidth (377-382).
  double bw = gr.channels * gr.intra;
  if (a == Algo::Ring && p == Proto::LL) bw = std::min(ll_max, bw * 0.5);
  if (a == Algo::Ring && p == Proto::LL128) bw = std::min(bw * 0.92, gr.channels * kRingLL128PerChannel[g][col]);
  if (a == Algo::Tree) bw = std::min(bw * 0.92, gr.channels * kTreePerChannel[g][col]);
  if (a == Algo::Tree && p == Proto::LL) bw = std::min(bw / 3.8, ll_max);
  if (a == Algo::Tree && p == Proto::LL128)
    bw = std::min(bw * (one_node ? 7.0 / 9.0 : 120.0 / 128.0), gr.channels * kTreeLL128PerChannel[g][col]);
  if (a == Algo::Pat) bw *= 0.75;
  if (a == Algo::Ring) bw *= static_cast<double>(s.ranks) / nsteps;
  if (a == Algo::Tree) bw *= 0.5;

  // Latency, lines 384-435. The IB plugin reports no network latency of its own
  // (src/transport/net_ib/init.cc line 558), so the graph adds none; a tree is the balanced
  // one (no 0.85 of line 336).
  const double intra = (s.nvlink ? kNvlinkLatency : kPciLatency)[ai][pi];
  const double inter = ppn == 1 ? kNetLatency[0][pi] : kNetLatency[ai][pi];
  double lat = kBaseLatency[ai][pi];
  if (a == Algo::Ring) {
    // Each step posts to the network proxy: 1 us on Intel (and other) hosts, 2 on AMD, three
    // times that for Simple (getNetOverhead, lines 228-233); none inside one node.
    const double overhead = one_node ? 0.0 : (s.cpu == Cpu::Amd ? 2.0 : 1.0) * (p == Proto::Simple ? 3 : 1);
    const int inter_steps = one_node ? 0 : all_reduce ? 2 * (s.nodes - 1) : s.nodes - 1;
    lat += (nsteps - inter_steps) * std::max(intra, overhead) + inter_steps * inter;
  } else if (a == Algo::Tree) {
    lat += 2 * ((ppn - 1) * intra + floor_log2(s.nodes) * inter);
  } else {
    lat += floor_log2(s.nodes) * (inter / 3.5) + s.ranks * 2.8;
  }

  // ncclTopoGetAlgoTime, lines 630-655: trees' correction by size, and rings' Simple all-reduce
  // across nodes paying 1.4x its latency (1.9x before Ampere) once each rank's share of a
  // channel reaches 64 bytes.
  const int log_size = floor_log2(std::floor(bytes / 64));
  if (a == Algo::Tree && log_size >= 0 && log_size < 23) bw *= kTreeCorrection[pi][log_size];
  if (a == Algo::Ring && p == Proto::Simple && all_reduce && !one_node && bytes / (gr.channels * s.ranks) >= 64)
    lat *= s.gpu < Gpu::Ampere ? 1.9 : 1.4;
  out.latency_us = lat;
  out.bandwidth_GBps = bw;
  out.time_us = lat + bytes / (1000 * bw);
  return out;
}

Prediction predict(const Setup& s, CollectiveOp op, double bytes) {
  Prediction best;
  bool found = false;
  for (Algo a : {Algo::Tree, Algo::Ring, Algo::Pat, Algo::Nvls, Algo::NvlsTree})
    for (Proto p : {Proto::LL, Proto::LL128, Proto::Simple}) {
      const Prediction c = cost(s, op, a, p, bytes);
      if (c.bandwidth_GBps > 0 && (!found || c.time_us < best.time_us)) best = c, found = true;
    }
  return best;
}

}  // namespace dtsim::network::nccl
