#include <gtest/gtest.h>

#include "sim/network/collectives.hpp"

#include "helpers.hpp"

using namespace dtsim;
using taskgraph::Algorithm;
using taskgraph::CollectiveOp;

namespace {

// One node of `gpus` GPUs on the given fabric, 25 GB/s per link, no latency.
network::ClusterSpec node(network::Fabric fabric, int gpus) {
  network::ClusterSpec c = test::flat_cluster(1);
  c.gpus_per_node = gpus;
  c.fabric = fabric;
  c.intra_bandwidth = 25e9;
  c.intra_latency = 0;
  return c;
}

std::vector<int> iota(int n) {
  std::vector<int> v;
  for (int i = 0; i < n; ++i) v.push_back(i);
  return v;
}

double all_reduce(const network::Platform& pf, double bytes, const std::vector<int>& ranks) {
  return network::analytical_time(pf, network::lower(pf, CollectiveOp::AllReduce, Algorithm::Ring, bytes, ranks));
}

// Several transfers at once, in one phase.
double transfers(const network::Platform& pf, const std::vector<std::pair<int, int>>& pairs, double bytes) {
  network::LoweredCollective lc;
  lc.phases.emplace_back();
  for (auto [a, b] : pairs) lc.phases[0].flows.push_back({a, b, bytes});
  return network::analytical_time(pf, lc);
}

}  // namespace

TEST(NvlinkRing, RingAllReduceInRingOrderUsesEachLinkOnce) {
  network::Platform pf(node(network::Fabric::NvLinkRing, 4));
  // 2(p-1) steps of S/p, each over one NVLink: the closed form at full link bandwidth.
  EXPECT_NEAR(all_reduce(pf, 1e9, iota(4)), network::ring_all_reduce_closed_form(4, 1e9, 0, 25e9), 1e-12);
}

TEST(NvlinkRing, FarGpusCrossTheLinksBetweenAndShareThem) {
  network::Platform pf(node(network::Fabric::NvLinkRing, 4));
  EXPECT_EQ(pf.route(0, 1).size(), 1u);
  EXPECT_EQ(pf.route(0, 2).size(), 2u);
  EXPECT_EQ(pf.route(0, 3).size(), 1u);  // the other way round
  // 0->2 and 1->3 both cross the link 1->2: each gets half of it.
  EXPECT_NEAR(transfers(pf, {{0, 2}, {1, 3}}, 1e9), 2 * 1e9 / 25e9, 1e-12);
  // 0->1 and 2->3 use different links: no sharing.
  EXPECT_NEAR(transfers(pf, {{0, 1}, {2, 3}}, 1e9), 1e9 / 25e9, 1e-12);
}

TEST(Pcie, PeerTrafficSharesTheHostBridge) {
  network::Platform pcie(node(network::Fabric::Pcie, 8));
  network::Platform nvswitch(node(network::Fabric::NvSwitch, 8));
  // Every ring hop crosses the one bridge, which carries all 8 at once: 8 x 2(p-1)/p S / B.
  EXPECT_NEAR(all_reduce(pcie, 1e9, iota(8)), 8 * 2.0 * 7 / 8 * 1e9 / 25e9, 1e-12);
  EXPECT_NEAR(all_reduce(pcie, 1e9, iota(8)) / all_reduce(nvswitch, 1e9, iota(8)), 8.0, 1e-9);
  // A wider bridge (two sockets' root ports, say) halves it.
  auto wide = node(network::Fabric::Pcie, 8);
  wide.host_bridge_bandwidth = 50e9;
  EXPECT_NEAR(all_reduce(network::Platform(wide), 1e9, iota(8)), 4 * 2.0 * 7 / 8 * 1e9 / 25e9, 1e-12);
}

TEST(Pcie, HostTrafficSharesTheGpusOwnLink) {
  network::Platform pf(node(network::Fabric::Pcie, 2));
  EXPECT_EQ(pf.endpoint_links(pf.pcie_endpoint(0)).front(), pf.endpoint_links(pf.fabric_endpoint(0)).front());
}

TEST(RailOptimized, SameRailIsOneHopOtherRailsClimbToTheSpine) {
  network::ClusterSpec c = test::flat_cluster(8);
  c.gpus_per_node = 2;
  c.nics_per_node = 2;
  c.topology = network::Topology::RailOptimized;
  c.oversubscription = 2;
  c.inter_latency = 0;
  network::Platform pf(c);
  const int a0 = pf.nic_endpoint(0), b0 = pf.nic_endpoint(2), b1 = pf.nic_endpoint(3);
  EXPECT_EQ(pf.route(a0, b0).size(), 2u);
  EXPECT_EQ(pf.route(a0, b1).size(), 4u);
  // Every node sends on rail 0 to rail 1 of the next: rail 0's uplink carries 8 flows at
  // 8 x 25 / 2 GB/s, twice as slow as the same flows kept on rail 0.
  std::vector<std::pair<int, int>> cross, same;
  for (int n = 0; n < 8; ++n) {
    cross.emplace_back(pf.nic_endpoint(2 * n), pf.nic_endpoint(2 * ((n + 1) % 8) + 1));
    same.emplace_back(pf.nic_endpoint(2 * n), pf.nic_endpoint(2 * ((n + 1) % 8)));
  }
  EXPECT_NEAR(transfers(pf, same, 1e9), 1e9 / 25e9, 1e-12);
  EXPECT_NEAR(transfers(pf, cross, 1e9), 2 * 1e9 / 25e9, 1e-12);
  // NCCL-style rings stay on their rails: the all-reduce costs what it costs on a flat fabric.
  network::ClusterSpec flat = c;
  flat.topology = network::Topology::SingleSwitch;
  flat.oversubscription = 1;
  EXPECT_NEAR(all_reduce(pf, 1e9, iota(16)), all_reduce(network::Platform(flat), 1e9, iota(16)), 1e-12);
}

TEST(BackgroundTraffic, TakesItsShareOfTheLinks) {
  network::ClusterSpec c = test::flat_cluster(8);
  c.inter_latency = 0;
  const double calm = all_reduce(network::Platform(c), 1e9, iota(8));
  c.background_nic = 0.3;
  // Bandwidth-bound: 1 / (1 - 0.3) as long.
  EXPECT_NEAR(all_reduce(network::Platform(c), 1e9, iota(8)) / calm, 1 / 0.7, 1e-9);
}
