#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "sim/network/collectives.hpp"
#include "sim/network/nccl_tuning.hpp"

#include "helpers.hpp"

using namespace dtsim;
using network::nccl::Algo;
using network::nccl::Cpu;
using network::nccl::Gpu;
using network::nccl::Proto;
using taskgraph::Algorithm;
using taskgraph::CollectiveOp;

namespace {

// Two DGX A100s as NCCL sees them: Ampere, AMD EPYC hosts, 16 ranks, 8 HDR NICs of 25 GB/s.
network::nccl::Setup two_dgx_a100() {
  network::nccl::Setup s;
  s.gpu = Gpu::Ampere;
  s.cpu = Cpu::Amd;
  s.ranks = 16;
  s.nodes = 2;
  s.nics = 8;
  s.nic_GBps = 25;
  return s;
}

std::string scenario(int nodes, const std::string& inter_node = "") {
  return R"({"schema_version": 1, "name": "t", "model": {"preset": "gpt2"}, "hardware": {"device": "a100-sxm-80gb"},
      "cluster": {"preset": "dgx-a100", "nodes": )" +
         std::to_string(nodes) + (inter_node.empty() ? "" : R"(, "inter_node": )" + inter_node) + R"(},
      "parallelism": {"data": )" + std::to_string(8 * nodes) + R"(, "micro_batch_size": 4},
      "training": {"global_batch_size": )" + std::to_string(32 * nodes) + "}}";
}

network::ClusterSpec load_cluster(int nodes, const std::string& inter_node = "") {
  test::TempDir dir;
  return config::load_scenario(dir.file("s.json", scenario(nodes, inter_node))).cluster;
}

std::vector<int> iota(int n) {
  std::vector<int> v;
  for (int i = 0; i < n; ++i) v.push_back(i);
  return v;
}

double seconds(const network::Platform& pf, CollectiveOp op, Algorithm a, double bytes, int gpus) {
  return network::analytical_time(pf, network::lower(pf, op, a, bytes, iota(gpus)));
}

}  // namespace

TEST(NcclTuning, ChannelSpeedIsTheSearchArraysEntryBelowTheNic) {
  // src/graph/search.cc lines 1052, 1058, 1064: HDR 25 GB/s runs channels at 24, NDR 50 at 48.
  EXPECT_EQ(network::nccl::channel_speed(Gpu::Ampere, 25), 24.0);
  EXPECT_EQ(network::nccl::channel_speed(Gpu::Volta, 12.5), 12.0);
  EXPECT_EQ(network::nccl::channel_speed(Gpu::Hopper, 50), 48.0);
  EXPECT_EQ(network::nccl::channel_speed(Gpu::Hopper, 25), 24.0);
  EXPECT_EQ(network::nccl::channel_speed(Gpu::Blackwell, 100), 96.0);
}

TEST(NcclTuning, RingAllReduceMatchesTuningCcByHand) {
  const auto s = two_dgx_a100();
  const double gib = 1073741824.0;
  // Simple: 8 channels x 24 GB/s, algorithm bandwidth x 16/30; latency 8.4 + 28 intra steps x
  // max(3.4, 3 x 2 us AMD proxy overhead) + 2 network steps x 14, times 1.4 (plateau).
  const auto simple = network::nccl::cost(s, CollectiveOp::AllReduce, Algo::Ring, Proto::Simple, gib);
  EXPECT_NEAR(simple.bandwidth_GBps, 192.0 * 16 / 30, 1e-9);
  EXPECT_NEAR(simple.latency_us, (8.4 + 28 * 6.0 + 2 * 14.0) * 1.4, 1e-9);
  EXPECT_NEAR(simple.time_us, simple.latency_us + gib / (1000 * 192.0 * 16 / 30), 1e-6);
  // LL: half the bus bandwidth, capped at AMD's 22.5 GB/s for 2 nodes; 6.6 + 28 x 2.0 + 2 x 2.7.
  const auto ll = network::nccl::cost(s, CollectiveOp::AllReduce, Algo::Ring, Proto::LL, 8);
  EXPECT_NEAR(ll.bandwidth_GBps, 22.5 * 16 / 30, 1e-9);
  EXPECT_NEAR(ll.latency_us, 6.6 + 28 * 2.0 + 2 * 2.7, 1e-9);
  // LL128: 0.92 of the bus bandwidth, capped at 8 x 20 GB/s; 14 + 28 x 2.0 + 2 x 4.0.
  const auto ll128 = network::nccl::cost(s, CollectiveOp::AllReduce, Algo::Ring, Proto::LL128, gib);
  EXPECT_NEAR(ll128.bandwidth_GBps, 160.0 * 16 / 30, 1e-9);
  EXPECT_NEAR(ll128.latency_us, 14 + 28 * 2.0 + 2 * 4.0, 1e-9);
  // All-gather: 15 steps, one across nodes, no plateau factor; bandwidth x 16/15.
  const auto ag = network::nccl::cost(s, CollectiveOp::AllGather, Algo::Ring, Proto::Simple, gib);
  EXPECT_NEAR(ag.latency_us, 8.4 + 14 * 6.0 + 1 * 14.0, 1e-9);
  EXPECT_NEAR(ag.bandwidth_GBps, 192.0 * 16 / 15, 1e-9);
}

TEST(NcclTuning, TreeAllReduceMatchesTuningCcByHand) {
  const auto s = two_dgx_a100();
  // Simple at 4 MiB: min(0.92 x 192, 8 x 23.6) x 0.5, times the correction 0.7 at
  // log2(4 MiB / 64) = 16; latency 8.4 + 2 x (7 chain hops x 4.0 + 1 level x 14).
  const auto t = network::nccl::cost(s, CollectiveOp::AllReduce, Algo::Tree, Proto::Simple, 4194304);
  EXPECT_NEAR(t.bandwidth_GBps, 0.92 * 192 * 0.5 * 0.7, 1e-9);
  EXPECT_NEAR(t.latency_us, 8.4 + 2 * (7 * 4.0 + 14.0), 1e-9);
  // LL below 64 bytes: no correction; min(176.64 / 3.8, 22.5) x 0.5; 6.8 + 2 x (7 x 0.6 + 5.0).
  const auto ll = network::nccl::cost(s, CollectiveOp::AllReduce, Algo::Tree, Proto::LL, 8);
  EXPECT_NEAR(ll.bandwidth_GBps, 22.5 * 0.5, 1e-9);
  EXPECT_NEAR(ll.latency_us, 6.8 + 2 * (7 * 0.6 + 5.0), 1e-9);
  // Trees only reduce.
  EXPECT_EQ(network::nccl::cost(s, CollectiveOp::AllGather, Algo::Tree, Proto::Simple, 4194304).bandwidth_GBps, 0.0);
}

TEST(NcclTuning, PicksTheFastestPairBySize) {
  const auto s = two_dgx_a100();
  const auto tiny = network::nccl::predict(s, CollectiveOp::AllReduce, 8);
  EXPECT_EQ(tiny.algo, Algo::Tree);
  EXPECT_EQ(tiny.proto, Proto::LL);
  EXPECT_NEAR(tiny.time_us, 25.2 + 8 / (1000 * 11.25), 1e-9);
  const auto huge = network::nccl::predict(s, CollectiveOp::AllReduce, 8589934592.0);
  EXPECT_EQ(huge.algo, Algo::Ring);
  EXPECT_EQ(huge.proto, Proto::Simple);
  // One GPU on each of 32 nodes: all-gathers may use PAT (8 + log2(32) x 14 / 3.5 + 32 x 2.8 us
  // at 0.75 x 24 GB/s), which beats the ring's 31 network steps at small sizes; the ring's
  // bandwidth wins large ones.
  network::nccl::Setup one{Gpu::Ampere, Cpu::Amd, 32, 32, 1, 25, true};
  const auto pat = network::nccl::predict(one, CollectiveOp::AllGather, 1024);
  EXPECT_EQ(pat.algo, Algo::Pat);
  EXPECT_NEAR(pat.latency_us, 8.0 + 5 * 14.0 / 3.5 + 32 * 2.8, 1e-9);
  EXPECT_NEAR(pat.bandwidth_GBps, 0.75 * 24, 1e-9);
  EXPECT_EQ(network::nccl::predict(one, CollectiveOp::AllGather, 1e9).algo, Algo::Ring);
}

TEST(NcclTuning, PresetsNameNcclsGpuAndCpu) {
  const auto a100 = load_cluster(2);
  EXPECT_EQ(a100.nccl_gpu, Gpu::Ampere);
  EXPECT_EQ(a100.nccl_cpu, Cpu::Amd);
  // `false` (or null) turns the model off; efficiency points take its place.
  EXPECT_EQ(load_cluster(2, R"({"nccl": false})").nccl_gpu, Gpu::None);
  EXPECT_EQ(load_cluster(2, R"({"nccl": null})").nccl_gpu, Gpu::None);
  EXPECT_EQ(load_cluster(2, R"({"nccl": {"gpu": "hopper", "cpu": "intel"}})").nccl_gpu, Gpu::Hopper);
  for (auto [inter, pointer] : {std::pair{R"({"nccl": {"gpu": "pascal", "cpu": "amd"}})", "/cluster/inter_node/nccl/gpu"},
                                {R"({"nccl": {"cpu": "power"}})", "/cluster/inter_node/nccl/cpu"},
                                {R"({"nccl": true})", "/cluster/inter_node/nccl"}}) {
    try {
      (void)load_cluster(2, inter);
      ADD_FAILURE() << inter;
    } catch (const InputError& e) {
      EXPECT_EQ(e.pointer(), pointer) << inter;
    }
  }
}

TEST(NcclTuning, NcclsTimeIsAFloorNotASecondLatency) {
  const network::Platform pf(load_cluster(2));
  auto off_spec = pf.spec();
  off_spec.nccl_gpu = Gpu::None;
  const network::Platform off(off_spec);
  const auto s = two_dgx_a100();
  // Large buffers: the ring takes NCCL's time (Simple at 192 GB/s bus bandwidth), not its own
  // line-rate time plus NCCL's latency.
  const double big = 8589934592.0;
  const double nccl_big = network::nccl::predict(s, CollectiveOp::AllReduce, big).time_us * 1e-6;
  EXPECT_NEAR(seconds(pf, CollectiveOp::AllReduce, Algorithm::Ring, big, 16), nccl_big, nccl_big * 1e-9);
  EXPECT_LT(seconds(off, CollectiveOp::AllReduce, Algorithm::Ring, big, 16), nccl_big);
  // Small buffers: dtsim's 30 ring steps at the ring's mean hop (2 of its 16 hops cross nodes at
  // 5 us, 14 stay inside at 3 us) already exceed NCCL's 25 us tree; unchanged.
  EXPECT_NEAR(seconds(pf, CollectiveOp::AllReduce, Algorithm::Ring, 8, 16),
              seconds(off, CollectiveOp::AllReduce, Algorithm::Ring, 8, 16), 1e-12);
  EXPECT_NEAR(seconds(pf, CollectiveOp::AllReduce, Algorithm::Ring, 8, 16), 30 * (2 * 5e-6 + 14 * 3e-6) / 16, 1e-9);
  // Inside one node the model does not apply; neither with the scenario's own points.
  EXPECT_NEAR(seconds(pf, CollectiveOp::AllGather, Algorithm::Ring, big, 8),
              seconds(off, CollectiveOp::AllGather, Algorithm::Ring, big, 8), 1e-12);
  const network::Platform points(load_cluster(2, R"({"efficiency_points": [[1, 1.0]]})"));
  EXPECT_NEAR(seconds(points, CollectiveOp::AllReduce, Algorithm::Ring, big, 16),
              seconds(off, CollectiveOp::AllReduce, Algorithm::Ring, big, 16), 1e-12);
}

TEST(NcclTuning, TwoDgxA100AllReduceReachesNvidiasMeasuredBusBandwidth) {
  // NVIDIA measures 192 GB/s all-reduce bus bandwidth between DGX A100s with 8 x 200 Gb/s HDR
  // (A. Addison, https://github.com/NVIDIA/nccl/issues/812). dtsim's hierarchical all-reduce
  // alone gave 248 GB/s there: with 8 NICs NCCL runs rings at large sizes (its trees' per-channel
  // cap is lower; S. Jeaugey, https://github.com/NVIDIA/nccl-tests/issues/196).
  const network::Platform pf(load_cluster(2));
  const double bytes = 8589934592.0;
  const double busbw = network::bus_bandwidth_factor(CollectiveOp::AllReduce, 16) * bytes /
                       seconds(pf, CollectiveOp::AllReduce, Algorithm::Auto, bytes, 16) / 1e9;
  EXPECT_NEAR(busbw, 192.0, 192.0 * 0.02);
}
