#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <stdexcept>

#include "sim/network/collectives.hpp"
#include "sim/network/algorithm_registry.hpp"

#include "helpers.hpp"

using namespace dtsim;

namespace {

network::ClusterSpec dgx(int nodes) {
  network::ClusterSpec c = test::flat_cluster(nodes);
  c.gpus_per_node = 8;
  c.nics_per_node = 8;
  return c;
}

std::vector<int> iota(int n) {
  std::vector<int> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = i;
  return v;
}

network::LoweredCollective all_reduce(const network::Platform& pf, double bytes, const std::vector<int>& ranks) {
  return network::lower(pf, taskgraph::CollectiveOp::AllReduce, taskgraph::Algorithm::Ring, bytes, ranks);
}

}  // namespace

using taskgraph::Algorithm;
using taskgraph::CollectiveOp;

network::LoweredCollective lower(const network::Platform& pf, CollectiveOp op, Algorithm a, double bytes, int p) {
  return network::lower(pf, op, a, bytes, iota(p));
}

TEST(RingAllReduce, EachProcessSendsTwiceItsShareTimesPMinusOne) {
  for (int p : {2, 8, 100}) {
    network::Platform pf(test::flat_cluster(p));
    const double n = 1e9;
    auto lc = all_reduce(pf, n, iota(p));
    ASSERT_EQ(lc.phases.size(), 1u);
    ASSERT_EQ(lc.flow_count(), static_cast<std::size_t>(p));
    for (const auto& f : lc.all_flows()) EXPECT_DOUBLE_EQ(f.bytes, 2.0 * (n / p) * (p - 1));  // 2 (N/m)(m-1)
  }
}

TEST(RingAllReduce, AnalyticalTimeIsTheClosedForm) {
  for (int p : {2, 8, 512}) {
    network::Platform pf(test::flat_cluster(p));
    for (double bytes : {1e3, 1e6, 1e9}) {
      double t = network::analytical_time(pf, all_reduce(pf, bytes, iota(p)));
      EXPECT_NEAR(t / network::ring_all_reduce_closed_form(p, bytes, 5e-6, 25e9), 1.0, 1e-12) << p << " " << bytes;
    }
  }
}

TEST(RingAllReduce, SingleGpuHasNothingToDo) {
  network::Platform pf(test::flat_cluster(1));
  EXPECT_EQ(all_reduce(pf, 1e9, {0}).flow_count(), 0u);
}

TEST(RingAllReduce, AcrossNodesEveryNicCarriesOneChannel) {
  network::Platform pf(dgx(4));
  const int p = 32;
  const double bytes = 8e9;
  auto lc = all_reduce(pf, bytes, iota(p));
  std::map<int, double> sent;  // by source endpoint
  for (const auto& f : lc.all_flows()) sent[f.src] += f.bytes;
  const double per_gpu = 2.0 * (p - 1) / p * bytes;
  for (int g = 0; g < p; ++g) {
    // Of each GPU's 2(p-1)/p S, one channel in eight leaves through its NIC, the rest over NVLink.
    EXPECT_NEAR(sent[pf.fabric_endpoint(g)], per_gpu * 7 / 8, 1.0) << g;
    EXPECT_NEAR(sent[pf.nic_endpoint(g)], per_gpu / 8, 1.0) << g;
  }
  // So the NICs, 8 x 25 GB/s per node, bound the time: busbw ~ 200 GB/s per GPU.
  double t = network::analytical_time(pf, lc);
  EXPECT_NEAR(per_gpu / 8 / 25e9 / t, 1.0, 0.01);
}

TEST(Platform, FewerNicsThanGpusShareThem) {
  network::ClusterSpec c = dgx(2);
  c.nics_per_node = 2;
  network::Platform pf(c);
  EXPECT_EQ(pf.nic_endpoint(0), pf.nic_endpoint(3));
  EXPECT_NE(pf.nic_endpoint(3), pf.nic_endpoint(4));
  EXPECT_NE(pf.nic_endpoint(0), pf.nic_endpoint(8));
}

TEST(Platform, OversubscribedFatTreeAddsASharedUplinkPerNode) {
  network::ClusterSpec c = dgx(2);
  c.topology = network::Topology::FatTree;
  c.oversubscription = 4.0;
  network::Platform pf(c);
  const auto& links = pf.endpoint_links(pf.nic_endpoint(0));
  ASSERT_EQ(links.size(), 2u);
  EXPECT_DOUBLE_EQ(pf.links()[static_cast<std::size_t>(links[1])].bandwidth, 8 * 25e9 / 4.0);
}

TEST(RingReduceScatterAllGather, HalfTheAllReduceTraffic) {
  network::Platform pf(test::flat_cluster(8));
  for (auto op : {CollectiveOp::ReduceScatter, CollectiveOp::AllGather}) {
    auto lc = lower(pf, op, Algorithm::Ring, 1e9, 8);
    ASSERT_EQ(lc.flow_count(), 8u);
    EXPECT_DOUBLE_EQ(lc.phases[0].flows[0].bytes, 7.0 / 8 * 1e9);  // (p-1)/p S per process
    EXPECT_DOUBLE_EQ(lc.phases[0].latency, 6 * 5e-6);               // p-1 steps, one paid by the flow
  }
}

TEST(MasterWorker, TwoNTimesMMinusOneThroughTheMaster) {
  const int m = 16;
  const double n = 1e8;
  network::Platform pf(test::flat_cluster(m));
  auto lc = lower(pf, CollectiveOp::AllReduce, Algorithm::MasterWorker, n, m);
  double through = 0;
  for (const auto& f : lc.all_flows())
    if (f.src == pf.nic_endpoint(0) || f.dst == pf.nic_endpoint(0)) through += f.bytes;
  EXPECT_DOUBLE_EQ(through, 2.0 * n * (m - 1));
  // Gather then scatter, each through the master's one link: 2 (m-1) N / B.
  EXPECT_NEAR(network::analytical_time(pf, lc), 2.0 * ((m - 1) * n / 25e9 + 5e-6), 1e-9);
}

TEST(HalvingDoubling, MatchesRabenseifnerClosedForm) {
  for (int p : {2, 8, 64}) {
    network::Platform pf(test::flat_cluster(p));
    const double s = 1e9;
    auto lc = lower(pf, CollectiveOp::AllReduce, Algorithm::HalvingDoubling, s, p);
    EXPECT_EQ(lc.phases.size(), 2 * static_cast<std::size_t>(std::log2(p)));
    // 2 log2(p) alpha + 2 (p-1)/p S / B (Thakur et al. 2005).
    double expected = 2 * std::log2(p) * 5e-6 + 2.0 * (p - 1) / p * s / 25e9;
    EXPECT_NEAR(network::analytical_time(pf, lc) / expected, 1.0, 1e-12) << p;
  }
}

TEST(HalvingDoubling, NonPowerOfTwoFoldsTheExtraRanksIn) {
  network::Platform pf(test::flat_cluster(6));
  auto lc = lower(pf, CollectiveOp::AllReduce, Algorithm::HalvingDoubling, 1e6, 6);
  EXPECT_EQ(lc.phases.size(), 1 + 4 + 1u);  // fold, 2 halving, 2 doubling, unfold
}

TEST(Tree, LatencyGrowsWithLogPNotP) {
  network::Platform pf(test::flat_cluster(512));
  const double tiny = 8;
  double tree = network::analytical_time(pf, lower(pf, CollectiveOp::AllReduce, Algorithm::Tree, tiny, 512));
  double ring = network::analytical_time(pf, lower(pf, CollectiveOp::AllReduce, Algorithm::Ring, tiny, 512));
  EXPECT_NEAR(tree, 2 * 9 * 5e-6, 1e-7);  // up and down a tree of depth log2(512) = 9
  EXPECT_NEAR(ring, 2 * 511 * 5e-6, 1e-7);
  // NCCL's choice: tree for small messages at scale, ring for large ones.
  EXPECT_EQ(network::choose(pf, CollectiveOp::AllReduce, Algorithm::Auto, tiny, iota(512)), Algorithm::Tree);
  network::Platform one(dgx(1));
  EXPECT_EQ(network::choose(one, CollectiveOp::AllReduce, Algorithm::Auto, 1e9, iota(8)), Algorithm::Ring);
}

TEST(Tree, MovesAsMuchAsARingPerRank) {
  network::Platform pf(test::flat_cluster(16));
  auto lc = lower(pf, CollectiveOp::AllReduce, Algorithm::Tree, 1e9, 16);
  std::map<int, double> sent;
  for (const auto& f : lc.all_flows()) sent[f.src] += f.bytes;
  for (const auto& [ep, b] : sent) EXPECT_LE(b, 2 * 1e9 + 1);  // at most S up and S down per rank
}

TEST(Hierarchical, ReduceScatterInsideAllReduceAcrossAllGatherInside) {
  network::Platform pf(dgx(4));
  auto lc = lower(pf, CollectiveOp::AllReduce, Algorithm::Hierarchical, 8e9, 32);
  ASSERT_EQ(lc.phases.size(), 3u);
  for (const auto& f : lc.phases[0].flows) EXPECT_LT(f.src, 32);   // NVLink ports only
  for (const auto& f : lc.phases[1].flows) EXPECT_GE(f.src, 32);   // NICs only
  // Across nodes each local rank's ring carries S/8: 2 (4-1)/4 x 1 GB per NIC.
  for (const auto& f : lc.phases[1].flows) EXPECT_DOUBLE_EQ(f.bytes, 2.0 * 3 / 4 * 1e9);
}

TEST(DirectAndRoundRobin, SameBytesDifferentPhases) {
  network::Platform pf(test::flat_cluster(8));
  auto direct = lower(pf, CollectiveOp::AllToAll, Algorithm::Direct, 8e6, 8);
  auto rr = lower(pf, CollectiveOp::AllToAll, Algorithm::RoundRobin, 8e6, 8);
  EXPECT_EQ(direct.phases.size(), 1u);
  EXPECT_EQ(direct.flow_count(), 56u);
  EXPECT_EQ(rr.phases.size(), 7u);
  double a = 0, b = 0;
  for (const auto& f : direct.all_flows()) a += f.bytes;
  for (const auto& f : rr.all_flows()) b += f.bytes;
  EXPECT_DOUBLE_EQ(a, 56 * 1e6);
  EXPECT_DOUBLE_EQ(a, b);
}

TEST(Broadcast, PipelinedChainAndBinomialTree) {
  network::Platform pf(test::flat_cluster(8));
  const double s = 1e9;
  // Chain: (p-1) alpha to fill the pipeline, then S / B.
  EXPECT_NEAR(network::analytical_time(pf, lower(pf, CollectiveOp::Broadcast, Algorithm::Ring, s, 8)),
              7 * 5e-6 + s / 25e9, 1e-9);
  // Binomial: log2(p) rounds of alpha + S / B.
  EXPECT_NEAR(network::analytical_time(pf, lower(pf, CollectiveOp::Broadcast, Algorithm::Tree, s, 8)),
              3 * (5e-6 + s / 25e9), 1e-9);
}

// Issue 25: NCCL broadcasts and reduces around its ring channels, one pipelined chain per channel
// carrying S / channels, so across nodes every NIC carries a share (busbw = algbw, nccl-tests).
// On 8 nodes of 8 GPUs and 8 NICs of 25 GB/s, 1 GB: S / (8 x 25 GB/s) = 5 ms, plus the fill of the
// slowest channel's 63 hops, 8 across nodes at 5 us and 55 inside at 2 us. One chain on one NIC
// took S / 25 GB/s = 40 ms.
TEST(Broadcast, AcrossNodesEveryNicCarriesOneChannelsChain) {
  network::Platform pf(dgx(8));
  const double s = 1e9, expected = s / (8 * 25e9) + 8 * 5e-6 + 55 * 2e-6;
  for (CollectiveOp op : {CollectiveOp::Broadcast, CollectiveOp::Reduce}) {
    const auto lc = lower(pf, op, Algorithm::Ring, s, 64);
    EXPECT_NEAR(network::analytical_time(pf, lc), expected, 1e-9) << taskgraph::to_string(op);
    std::map<int, double> nic_sent;
    for (const auto& f : lc.all_flows())
      if (f.src >= 64) nic_sent[f.src] += f.bytes;
    // Every NIC of every node but one: in one channel the ring hop the chain leaves out (into the
    // root for a broadcast, out of it for a reduce) crosses nodes.
    EXPECT_EQ(nic_sent.size(), 63u);
    for (const auto& [nic, b] : nic_sent) EXPECT_DOUBLE_EQ(b, s / 8) << nic;
  }
  // The root need not be the first GPU: a reduce toward GPU 9 still ends there.
  const auto lc = network::lower(pf, CollectiveOp::Reduce, Algorithm::Ring, s, {9, 0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15});
  std::map<int, double> received;
  for (const auto& f : lc.all_flows()) received[f.dst] += f.bytes;
  EXPECT_EQ(received.count(9), 1u);
}

// The textbook all-to-all all-reduce (every worker sends its whole array to every other and sums
// what it gets): n (p - 1) bytes leave each worker, against the ring's 2 n (p - 1) / p, so on p
// single-NIC nodes it takes (p - 1) n / B + alpha. `direct` is the scatter-reduce variant, which
// moves the ring's bytes.
TEST(Naive, EveryWorkerSendsItsWholeArrayToEveryOther) {
  network::Platform pf(test::flat_cluster(8));
  const double n = 1e8;
  const auto lc = lower(pf, CollectiveOp::AllReduce, Algorithm::Naive, n, 8);
  ASSERT_EQ(lc.phases.size(), 1u);
  EXPECT_EQ(lc.flow_count(), 56u);
  std::map<int, double> sent;
  for (const auto& f : lc.all_flows()) sent[f.src] += f.bytes;
  ASSERT_EQ(sent.size(), 8u);
  for (const auto& [ep, b] : sent) EXPECT_DOUBLE_EQ(b, 7 * n) << ep;
  EXPECT_NEAR(network::analytical_time(pf, lc), 7 * n / 25e9 + 5e-6, 1e-9);
  double direct = 0;
  for (const auto& f : lower(pf, CollectiveOp::AllReduce, Algorithm::Direct, n, 8).all_flows()) direct += f.bytes;
  EXPECT_DOUBLE_EQ(direct, 8 * 2 * 7.0 / 8 * n);
  EXPECT_EQ(network::algorithm_named("naive"), Algorithm::Naive);
  EXPECT_THROW(lower(pf, CollectiveOp::ReduceScatter, Algorithm::Naive, n, 8), std::invalid_argument);
}

TEST(Unsupported, PairsAreRejected) {
  network::Platform pf(test::flat_cluster(4));
  EXPECT_THROW(lower(pf, CollectiveOp::Broadcast, Algorithm::HalvingDoubling, 1e6, 4), std::invalid_argument);
  EXPECT_THROW(lower(pf, CollectiveOp::ReduceScatter, Algorithm::MasterWorker, 1e6, 4), std::invalid_argument);
}

TEST(BusBandwidth, NcclTestsFactors) {
  EXPECT_DOUBLE_EQ(network::bus_bandwidth_factor(CollectiveOp::AllReduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(network::bus_bandwidth_factor(CollectiveOp::AllGather, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(network::bus_bandwidth_factor(CollectiveOp::Broadcast, 8), 1.0);
}

TEST(SendRecv, UsesNvlinkInsideANodeAndNicsAcross) {
  network::Platform pf(dgx(2));
  auto inside = network::lower(pf, CollectiveOp::SendRecv, Algorithm::Ring, 1e6, {0, 1});
  auto across = network::lower(pf, CollectiveOp::SendRecv, Algorithm::Ring, 1e6, {0, 8});
  EXPECT_EQ(inside.phases[0].flows[0].src, pf.fabric_endpoint(0));
  EXPECT_EQ(across.phases[0].flows[0].src, pf.nic_endpoint(0));
  EXPECT_EQ(across.phases[0].flows[0].dst, pf.nic_endpoint(8));
}

TEST(ParameterServer, DedicatedServersBoundByTheirLinks) {
  for (int p : {4, 16, 64}) {
    network::ClusterSpec c = test::flat_cluster(p);
    c.ps_servers = 8;
    c.ps_nic_bandwidth = 25e9;
    c.host_memory_bandwidth = 100e9;
    network::Platform pf(c);
    const double s = 1e9;
    auto lc = lower(pf, CollectiveOp::AllReduce, Algorithm::ParameterServer, s, p);
    // Push and pull each take max(S / B_worker, p S / (N B_server)) plus a hop; the servers sum
    // p contributions of S/N in between.
    const double move = std::max(s / 25e9, p * s / (8 * 25e9)) + 5e-6;
    const double sum = (p + 1) * (s / 8) / 100e9;
    EXPECT_NEAR(network::analytical_time(pf, lc) / (2 * move + sum), 1.0, 1e-9) << p;
  }
}

TEST(ParameterServer, ColocatedShardsOnEveryWorker) {
  network::Platform pf(test::flat_cluster(8));
  auto lc = lower(pf, CollectiveOp::AllReduce, Algorithm::ParameterServer, 8e6, 8);
  ASSERT_EQ(lc.phases.size(), 2u);
  EXPECT_EQ(lc.phases[0].flows.size(), 56u);  // each worker to the 7 other shards
}

TEST(CentralStorage, EveryGpuCrossesPcieTwice) {
  network::ClusterSpec c = test::flat_cluster(1);
  c.gpus_per_node = 8;
  c.pcie_bandwidth = 16e9;
  c.host_memory_bandwidth = 100e9;
  network::Platform pf(c);
  const double s = 1e9;
  auto lc = lower(pf, CollectiveOp::AllReduce, Algorithm::CentralStorage, s, 8);
  // Host memory takes 8 S each way at 100 GB/s, slower than one GPU's S over 16 GB/s PCIe.
  EXPECT_NEAR(network::analytical_time(pf, lc), 2 * (std::max(s / 16e9, 8 * s / 100e9) + 2e-6), 1e-9);
}

TEST(RingChannels, RunAsLockstepChainsOfAtMost64HopsCoveringEveryHop) {
  // 128 nodes of 8 GPUs and 8 NICs: 8 channels of 1,024 hops each.
  network::ClusterSpec c = test::flat_cluster(128);
  c.gpus_per_node = 8;
  c.nics_per_node = 8;
  network::Platform pf(c);
  auto lc = lower(pf, CollectiveOp::AllReduce, Algorithm::Ring, 1e9, 1024);
  ASSERT_EQ(lc.phases.size(), 1u);
  const auto& ph = lc.phases[0];
  ASSERT_EQ(ph.chains.size(), 8u * 16u);
  std::vector<int> covered(ph.flows.size(), 0);
  for (const auto& ch : ph.chains) {
    EXPECT_LE(ch.count, 64u);
    for (std::size_t i = ch.first; i < ch.first + ch.count; ++i) {
      ++covered[i];
      EXPECT_DOUBLE_EQ(ph.flows[i].bytes, ph.flows[ch.first].bytes);
    }
  }
  for (int n : covered) EXPECT_EQ(n, 1);
  EXPECT_EQ(ph.flows.size(), 8u * 1024u);
  // The NIC hop sets the pace of 2(p-1)/p S/8; a chunk's latency is the sum of the 2(p-1) hops it
  // crosses, at the ring's mean hop: 128 of its 1,024 hops cross nodes (5 us), 896 stay inside.
  const double mean_hop = (128 * 5e-6 + 896 * c.intra_latency) / 1024;
  EXPECT_NEAR(network::analytical_time(pf, lc), 2.0 * 1023 / 1024 * 1e9 / 8 / 25e9 + 2 * 1023 * mean_hop, 1e-9);
}

TEST(RingChannels, StayPlainFlowsWhenHopsShareALink) {
  // Every hop of a PCIe node crosses its host bridge: no chain could stand for them.
  network::ClusterSpec c = test::flat_cluster(1);
  c.gpus_per_node = 8;
  c.fabric = network::Fabric::Pcie;
  network::Platform pf(c);
  auto lc = lower(pf, CollectiveOp::AllReduce, Algorithm::Ring, 1e9, 8);
  ASSERT_EQ(lc.phases.size(), 1u);
  EXPECT_TRUE(lc.phases[0].chains.empty());
  EXPECT_EQ(lc.flow_count(), 8u);
}

TEST(RingLatency, AChunkPaysTheHopsItCrossesNotTheSlowestEveryStep) {
  // 4 nodes of 8 GPUs, 2 us inside a node and 5 us across: a ring's 32 hops are 4 NIC hops and 28
  // NVSwitch hops, so a chunk crossing 2 x 31 of them pays 62 x (4 x 5 + 28 x 2) / 32 = 147.25 us
  // (NCCL's tuning.cc, lines 404-412, counts the same ring as 6 network steps and 56 NVLink
  // ones: 6 x 5 + 56 x 2 = 142 us), not 62 x 5 = 310 us.
  network::ClusterSpec c = test::flat_cluster(4);
  c.gpus_per_node = 8;
  c.nics_per_node = 8;
  const network::Platform pf(c);
  const double t = network::analytical_time(pf, lower(pf, CollectiveOp::AllReduce, Algorithm::Ring, 1e-3, 32));
  EXPECT_NEAR(t, 62 * (4 * 5e-6 + 28 * 2e-6) / 32, 1e-9);
  // One GPU per node, or one node: every hop alike, the closed form as before.
  const network::Platform one(test::flat_cluster(8));
  EXPECT_NEAR(network::analytical_time(one, lower(one, CollectiveOp::AllReduce, Algorithm::Ring, 1e-3, 8)), 14 * 5e-6, 1e-9);
}
