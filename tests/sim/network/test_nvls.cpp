#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "sim/network/algorithms.hpp"
#include "sim/network/collectives.hpp"
#include "sim/network/nccl_tuning.hpp"

#include "helpers.hpp"

// NVLink SHARP: NCCL's NVLS and NVLS-tree model (sim/network/nvls_tuning.cpp, from NVIDIA/nccl
// v2.30.7 src/graph/tuning.cc and search.cc), its choice against rings, the lowering through the
// switch (sim/network/nvls.cpp), and the presets against published nccl-tests tables.
using namespace dtsim;
using network::nccl::Algo;
using network::nccl::Cpu;
using network::nccl::Gpu;
using network::nccl::Proto;
using taskgraph::Algorithm;
using taskgraph::CollectiveOp;

namespace {

network::nccl::Setup hopper(int nodes, int links = 18) {
  network::nccl::Setup s;
  s.gpu = Gpu::Hopper;
  s.cpu = Cpu::Intel;
  s.ranks = 8 * nodes;
  s.nodes = nodes;
  s.nics = 8;
  s.nic_GBps = 50;
  s.nvls = true;
  s.nvlinks = links;
  return s;
}

network::ClusterSpec preset(const std::string& name, const std::string& device, int nodes, const std::string& extra = "") {
  test::TempDir dir;
  const int per = name == "nvl72" ? 72 : 8;
  const std::string json = R"({"schema_version": 1, "name": "t", "model": {"preset": "gpt2"}, "hardware": {"device": ")" +
                           device + R"("}, "cluster": {"preset": ")" + name + R"(", "nodes": )" + std::to_string(nodes) +
                           extra + R"(}, "parallelism": {"data": )" + std::to_string(per * nodes) +
                           R"(}, "training": {"global_batch_size": )" + std::to_string(per * nodes) + "}}";
  return config::load_scenario(dir.file("s.json", json)).cluster;
}

std::vector<int> iota(int n) {
  std::vector<int> v;
  for (int i = 0; i < n; ++i) v.push_back(i);
  return v;
}

// nccl-tests' bus bandwidth of dtsim's all-reduce (GB/s).
double busbw(const network::Platform& pf, double bytes, int gpus) {
  const double t = network::analytical_time(pf, network::lower(pf, CollectiveOp::AllReduce, Algorithm::Ring, bytes, iota(gpus)));
  return network::bus_bandwidth_factor(CollectiveOp::AllReduce, gpus) * bytes / t / 1e9;
}

}  // namespace

TEST(Nvls, GraphsFollowNcclsSearchByHand) {
  // H100: 18 NVLinks x 20.6 GB/s (topo.h line 22) = 370.8. NVLS on one node: 8 channels, each
  // GPU carries 9 x speed (its head twice): 40 fits (360), 50 does not; the second pass raises the
  // inter speed to 60, the first array speed not below 2 x 40 ... here the array's top.
  auto g = network::nccl::nvls_graph(hopper(1));
  EXPECT_EQ(g.channels, 8);
  EXPECT_EQ(g.intra, 40.0);
  EXPECT_EQ(g.inter, 60.0);
  // Rings on one node: 6 channels at 60 (360 of 370.8), duplicated to 12 at 30.
  auto r = network::nccl::intra_ring_graph(hopper(1));
  EXPECT_EQ(r.channels, 12);
  EXPECT_EQ(r.intra, 30.0);
  // Across nodes the NVLS graph walks the network speeds: 40 x 9 fits, 42 x 9 does not; the
  // inter speed rises to the NDR NIC's 48.
  g = network::nccl::nvls_graph(hopper(2));
  EXPECT_EQ(g.channels, 8);
  EXPECT_EQ(g.intra, 40.0);
  EXPECT_EQ(g.inter, 48.0);
  // H800's 8 NVLinks (164.8): rings 4 x 40 beat 2 x 60 and 3 x 50, then duplicate to 8 x 20.
  r = network::nccl::intra_ring_graph(hopper(1, 8));
  EXPECT_EQ(r.channels, 8);
  EXPECT_EQ(r.intra, 20.0);
  // B200: 18 x 40.1 = 721.8; NVLS 9 x 80 fits; rings 8 x 90 duplicated to 16 x 45. GB200 NVL72:
  // 32 channels (the arity), 33 x 20 fits.
  auto b = hopper(1);
  b.gpu = Gpu::Blackwell;
  g = network::nccl::nvls_graph(b);
  EXPECT_EQ(g.intra, 80.0);
  EXPECT_EQ(g.inter, 90.0);
  r = network::nccl::intra_ring_graph(b);
  EXPECT_EQ(r.channels, 16);
  EXPECT_EQ(r.intra, 45.0);
  b.ranks = 72;
  g = network::nccl::nvls_graph(b);
  EXPECT_EQ(g.channels, 32);
  EXPECT_EQ(g.intra, 20.0);
  EXPECT_EQ(g.inter, 40.0);
}

TEST(Nvls, CostsMatchTuningCcByHand) {
  const double gib = 1073741824.0;
  // All-reduce on 8 H100s: per channel min(40 x 0.85 x 7/8 x 2, 60) = 59.5, 8 channels, algorithm
  // bandwidth x 8/14; latency the NVLink NVLS 25 us alone (base 0).
  const auto ar = network::nccl::cost(hopper(1), CollectiveOp::AllReduce, Algo::Nvls, Proto::Simple, gib);
  EXPECT_NEAR(ar.bandwidth_GBps, 8 * 59.5 * 8 / 14, 1e-9);
  EXPECT_NEAR(ar.latency_us, 25.0, 1e-12);
  // All-gather: (ppn - 1)/ppn instead of 2, and no conversion to algorithm bandwidth.
  const auto ag = network::nccl::cost(hopper(1), CollectiveOp::AllGather, Algo::Nvls, Proto::Simple, gib);
  EXPECT_NEAR(ag.bandwidth_GBps, 8 * 40 * 0.85 * 7 / 8 * 7 / 8, 1e-9);
  // Rings on one node: 12 x 30 = 360 GB/s; Simple 8.4 + 14 x 3.4 us; LL min(141, 180) at
  // 6.6 + 14 x 0.6 us; no network overhead and no 1.4 plateau inside a node.
  const auto simple = network::nccl::cost(hopper(1), CollectiveOp::AllReduce, Algo::Ring, Proto::Simple, gib);
  EXPECT_NEAR(simple.bandwidth_GBps, 360.0 * 8 / 14, 1e-9);
  EXPECT_NEAR(simple.latency_us, 8.4 + 14 * 3.4, 1e-9);
  const auto ll = network::nccl::cost(hopper(1), CollectiveOp::AllReduce, Algo::Ring, Proto::LL, 1024);
  EXPECT_NEAR(ll.bandwidth_GBps, 141.0 * 8 / 14, 1e-9);
  EXPECT_NEAR(ll.latency_us, 6.6 + 14 * 0.6, 1e-9);
  // NVLS tree over 2 nodes: min(59.5, 2 x 48, 57.7 perChMaxNVLSTreeBw) = 57.7, x 16/30; latency
  // 25 + 2 x log2(2) x 20.9. Over 4: min(59.5, 48, 45.5); 25 + 2 x 2 x 20.9.
  const auto t2 = network::nccl::cost(hopper(2), CollectiveOp::AllReduce, Algo::NvlsTree, Proto::Simple, gib);
  EXPECT_NEAR(t2.bandwidth_GBps, 8 * 57.7 * 16 / 30, 1e-9);
  EXPECT_NEAR(t2.latency_us, 25 + 2 * 20.9, 1e-9);
  const auto t4 = network::nccl::cost(hopper(4), CollectiveOp::AllReduce, Algo::NvlsTree, Proto::Simple, gib);
  EXPECT_NEAR(t4.bandwidth_GBps, 8 * 45.5 * 32 / 62, 1e-9);
  EXPECT_NEAR(t4.latency_us, 25 + 4 * 20.9, 1e-9);
  // Blackwell NVLS trees on x86 hosts take the trees' Simple correction: 0.7 at 4 MiB.
  auto b = hopper(2);
  b.gpu = Gpu::Blackwell;
  const auto bt = network::nccl::cost(b, CollectiveOp::AllReduce, Algo::NvlsTree, Proto::Simple, 4194304);
  EXPECT_NEAR(bt.bandwidth_GBps, 8 * std::min({48 * 0.74 * 7 / 8 * 2, 96.0, 96.0}) * 16 / 30 * 0.7, 1e-9);
  b.cpu = Cpu::Arm;
  EXPECT_NEAR(network::nccl::cost(b, CollectiveOp::AllReduce, Algo::NvlsTree, Proto::Simple, 4194304).bandwidth_GBps,
              bt.bandwidth_GBps / 0.7, 1e-9);
}

TEST(Nvls, OfferedWhereNcclOffersIt) {
  const double gib = 1073741824.0;
  auto none = [&](network::nccl::Setup s, CollectiveOp op, Algo a, Proto p = Proto::Simple) {
    return network::nccl::cost(s, op, a, p, gib).bandwidth_GBps == 0.0;
  };
  EXPECT_TRUE(none(hopper(1), CollectiveOp::AllReduce, Algo::Nvls, Proto::LL128));     // Simple only
  EXPECT_TRUE(none(hopper(1), CollectiveOp::AllReduce, Algo::NvlsTree));               // trees need nodes
  EXPECT_TRUE(none(hopper(2), CollectiveOp::AllReduce, Algo::Nvls));                   // CollNet only
  EXPECT_TRUE(none(hopper(2), CollectiveOp::AllGather, Algo::NvlsTree));               // all-reduce only
  auto ampere = hopper(1);
  ampere.gpu = Gpu::Ampere;                                                             // nvlsEfficiency 0
  EXPECT_TRUE(none(ampere, CollectiveOp::AllReduce, Algo::Nvls));
  auto off = hopper(2);
  off.nvls = false;
  EXPECT_TRUE(none(off, CollectiveOp::AllReduce, Algo::NvlsTree));
  EXPECT_FALSE(none(hopper(1), CollectiveOp::ReduceScatter, Algo::Nvls));
}

TEST(Nvls, NcclPicksRingLLForSmallBuffersAndNvlsFromAboutOneMebibyte) {
  // One node: ring LL (15 us, 80.6 GB/s) until NVLS's 25 us and 272 GB/s catch up, between 1 and
  // 2 MiB (28.0 against 28.9 us at 1 MiB).
  EXPECT_EQ(network::nccl::predict(hopper(1), CollectiveOp::AllReduce, 65536).algo, Algo::Ring);
  EXPECT_EQ(network::nccl::predict(hopper(1), CollectiveOp::AllReduce, 1048576).algo, Algo::Ring);
  EXPECT_EQ(network::nccl::predict(hopper(1), CollectiveOp::AllReduce, 2097152).algo, Algo::Nvls);
  EXPECT_EQ(network::nccl::predict(hopper(1), CollectiveOp::AllReduce, 8589934592.0).algo, Algo::Nvls);
  // All-gathers stay on rings: NVLS gathers at 208 GB/s, the ring at 411.
  EXPECT_EQ(network::nccl::predict(hopper(1), CollectiveOp::AllGather, 1073741824.0).algo, Algo::Ring);
  // Across nodes the NVLS tree takes large all-reduces (461.6 GB/s bus bandwidth against the
  // ring's 384 on 2 nodes).
  EXPECT_EQ(network::nccl::predict(hopper(2), CollectiveOp::AllReduce, 1073741824.0).algo, Algo::NvlsTree);
  EXPECT_NE(network::nccl::predict(hopper(2), CollectiveOp::AllReduce, 8).algo, Algo::NvlsTree);
}

TEST(Nvls, AllReduceGoesUpAndDownThroughTheSwitch) {
  auto c = preset("dgx-h100", "h100-sxm-80gb", 1);
  ASSERT_TRUE(c.intra_nvls);
  const network::Platform pf(c);
  const double s = 1e9;
  // Each GPU sends S + S/8 to the switch and receives as much: 1.125 S at 450 GB/s, not the
  // ring's 1.75 S.
  const auto lc = network::algorithms::nvls(pf, CollectiveOp::AllReduce, s, iota(8));
  ASSERT_EQ(lc.phases.size(), 1u);
  ASSERT_EQ(lc.phases[0].flows.size(), 16u);
  for (const auto& f : lc.phases[0].flows) {
    EXPECT_TRUE(f.src == pf.switch_endpoint(0) || f.dst == pf.switch_endpoint(0));
    EXPECT_NEAR(f.bytes, 1.125 * s, 1e-3);
  }
  EXPECT_NEAR(network::analytical_time(pf, lc), 1.125 * s / 450e9 + 2 * 2e-6, 1e-12);
  // Reduce-scatter: S up, S/8 down.
  const auto rs = network::algorithms::nvls(pf, CollectiveOp::ReduceScatter, s, iota(8));
  EXPECT_NEAR(network::analytical_time(pf, rs), s / 450e9 + 2e-6, 1e-12);
  // NCCL's model is the floor: at 8 GiB NVLS's 272 GB/s, not the switch's line-rate 400.
  const double big = 8589934592.0;
  const double t = network::analytical_time(pf, network::lower(pf, CollectiveOp::AllReduce, Algorithm::Ring, big, iota(8)));
  EXPECT_NEAR(t, (25.0 + big / (1000 * 272.0)) * 1e-6, 1e-9);
}

TEST(Nvls, TreeAcrossNodesPipelinesSwitchAndNics) {
  // 2 DGX H100s: each GPU moves 1.125 S through its switch port (S/400 GB/s) while local rank j
  // all-reduces its S/8 share with the other node over NIC j: S/8 each way, S/400 GB/s at
  // 50 GB/s. One phase; latency up and down one tree level of NIC hops (5 us each).
  const network::Platform pf(preset("dgx-h100", "h100-sxm-80gb", 2));
  const double s = 1e9;
  const auto lc = network::algorithms::nvls(pf, CollectiveOp::AllReduce, s, iota(16));
  ASSERT_EQ(lc.phases.size(), 1u);
  EXPECT_NEAR(network::analytical_time(pf, lc), s / 400e9 + 2 * 5e-6, 1e-12);
  // NCCL's NVLS tree is the floor at large sizes: 8 x 57.7 GB/s bus bandwidth.
  const double big = 8589934592.0;
  EXPECT_NEAR(busbw(pf, big, 16), 8 * 57.7, 8 * 57.7 * 0.01);
}

TEST(Nvls, DgxH100AllReduceFollowsAzuresNvlsTable) {
  // Published, not fitted: nccl-tests all_reduce busbw on 8 H100 (NCCL 2.18.5, NVLS), Azure ND
  // H100 v5, https://github.com/samuel-bohman/AI-benchmarking-guide/blob/main/Azure_Results/ND_H100_v5_results.md
  // (NCCL Bandwidth table): 1G 466.35, 2G 472.36, 4G 475.54, 8G 478.87 GB/s. From 1 GiB NCCL's
  // latency is below 1% of the time, and the table's own increments (273-285 GB/s algorithm
  // bandwidth between 512M and 8G) lie within 5% of the model's 272: 3%.
  const network::Platform pf(preset("dgx-h100", "h100-sxm-80gb", 1));
  const std::vector<std::pair<double, double>> large = {
      {1073741824.0, 466.35}, {2147483648.0, 472.36}, {4294967296.0, 475.54}, {8589934592.0, 478.87}};
  for (auto [bytes, published] : large) EXPECT_NEAR(busbw(pf, bytes, 8), published, 0.03 * published) << bytes;
  // Mid sizes: the model has no pipeline fill, so it is fast there (the table's time less the
  // model's bandwidth term leaves 38-80 us of latency, not 25): 8M 172.13, 67M 361.78 GB/s
  // published; dtsim above them, by less than 60%.
  for (auto [bytes, published] : std::vector<std::pair<double, double>>{{8388608.0, 172.13}, {67108864.0, 361.78}}) {
    EXPECT_GT(busbw(pf, bytes, 8), published) << bytes;
    EXPECT_LT(busbw(pf, bytes, 8), 1.6 * published) << bytes;
  }
}

TEST(Nvls, ClustersWithoutItAreUnchanged) {
  // DGX A100 (no NVLS): no switch endpoint, and one node keeps its measured efficiency curve.
  const auto a100 = preset("dgx-a100", "a100-sxm-80gb", 1);
  EXPECT_FALSE(a100.intra_nvls);
  const network::Platform pf(a100);
  EXPECT_EQ(pf.switch_endpoint(0), -1);
  EXPECT_FALSE(network::nccl_prediction(pf, CollectiveOp::AllReduce, 1e9, iota(8)).has_value());
  // Turned off on an H100 preset, its all-reduce is the ring again.
  const network::Platform off(preset("dgx-h100", "h100-sxm-80gb", 1, R"(, "intra_node": {"nvls": false})"));
  EXPECT_NEAR(busbw(off, 8589934592.0, 8), 450.0, 450.0 * 0.01);
}

TEST(Nvls, BadInputSaysWhere) {
  auto pointer = [](const std::string& extra) {
    try {
      (void)preset("dgx-a100", "a100-sxm-80gb", 1, extra);
    } catch (const InputError& e) {
      return e.pointer();
    }
    return std::string("no error");
  };
  EXPECT_EQ(pointer(R"(, "intra_node": {"fabric": "pcie", "nvls": true})"), "/cluster/intra_node/nvls");
  EXPECT_EQ(pointer(R"(, "intra_node": {"nvls": true})"), "/cluster/inter_node/nccl");
}
