#include <gtest/gtest.h>

#include <map>

#include "sim/network/collectives.hpp"

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

TEST(RingAllReduce, EachProcessSendsTwiceItsShareTimesPMinusOne) {
  for (int p : {2, 8, 100}) {
    network::Platform pf(test::flat_cluster(p));
    const double n = 1e9;
    auto lc = all_reduce(pf, n, iota(p));
    ASSERT_EQ(lc.flows.size(), static_cast<std::size_t>(p));
    for (const auto& f : lc.flows) EXPECT_DOUBLE_EQ(f.bytes, 2.0 * (n / p) * (p - 1));  // 2 (N/m)(m-1)
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
  EXPECT_TRUE(all_reduce(pf, 1e9, {0}).flows.empty());
}

TEST(RingAllReduce, AcrossNodesEveryNicCarriesOneChannel) {
  network::Platform pf(dgx(4));
  const int p = 32;
  const double bytes = 8e9;
  auto lc = all_reduce(pf, bytes, iota(p));
  std::map<int, double> sent;  // by source endpoint
  for (const auto& f : lc.flows) sent[f.src] += f.bytes;
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
  auto rs = network::lower(pf, taskgraph::CollectiveOp::ReduceScatter, taskgraph::Algorithm::Ring, 1e9, iota(8));
  auto ag = network::lower(pf, taskgraph::CollectiveOp::AllGather, taskgraph::Algorithm::Ring, 1e9, iota(8));
  for (const auto* lc : {&rs, &ag}) {
    ASSERT_EQ(lc->flows.size(), 8u);
    EXPECT_DOUBLE_EQ(lc->flows[0].bytes, 7.0 / 8 * 1e9);  // (p-1)/p S per process
    EXPECT_DOUBLE_EQ(lc->extra_latency, 6 * 5e-6);         // p-1 steps, one paid by the flow
  }
}

TEST(SendRecv, UsesNvlinkInsideANodeAndNicsAcross) {
  network::Platform pf(dgx(2));
  auto inside = network::lower(pf, taskgraph::CollectiveOp::SendRecv, taskgraph::Algorithm::Ring, 1e6, {0, 1});
  auto across = network::lower(pf, taskgraph::CollectiveOp::SendRecv, taskgraph::Algorithm::Ring, 1e6, {0, 8});
  EXPECT_EQ(inside.flows[0].src, pf.fabric_endpoint(0));
  EXPECT_EQ(across.flows[0].src, pf.nic_endpoint(0));
  EXPECT_EQ(across.flows[0].dst, pf.nic_endpoint(8));
}
