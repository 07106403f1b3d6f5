#include <gtest/gtest.h>

#include "sim/config/scenario.hpp"
#include "sim/network/collectives.hpp"
#include "sim/results/result.hpp"
#include "sim/replay/replay.hpp"

// Each test runs in its own process (gtest_discover_tests): SimGrid's engine runs once per process.
#include "helpers.hpp"

using namespace dtsim;

namespace {

// One ring all-reduce of `bytes` on p ranks, after a compute task of 1 ms on rank 0.
double simulate_ring(int p, double bytes) {
  network::Platform pf(test::flat_cluster(p));
  taskgraph::TaskGraph g;
  g.num_ranks = p;
  taskgraph::Work warm;
  warm.name = "warmup";
  int w = g.add_work(warm);
  std::vector<int> ranks;
  for (int i = 0; i < p; ++i) ranks.push_back(i);
  int grp = g.add_group(ranks);
  int c0 = g.add_compute(0, w, taskgraph::Category::Compute, "warmup", {});
  g.add_collective({taskgraph::CollectiveOp::AllReduce, taskgraph::Algorithm::Ring, {grp}, bytes}, "ar", {c0});
  std::vector<double> seconds{1e-3};
  auto t = replay::replay_simgrid({g, seconds, pf});
  return t.makespan - 1e-3;
}

void expect_closed_form(int p, double bytes) {
  double expected = network::ring_all_reduce_closed_form(p, bytes, 5e-6, 25e9);
  EXPECT_NEAR(simulate_ring(p, bytes) / expected, 1.0, 0.01);
}

}  // namespace

TEST(SimGridRing, MatchesClosedFormAt8Ranks1GB) { expect_closed_form(8, 1e9); }
TEST(SimGridRing, MatchesClosedFormAt64Ranks64MB) { expect_closed_form(64, 64e6); }
TEST(SimGridRing, MatchesClosedFormAt512Ranks1MB) { expect_closed_form(512, 1e6); }  // latency-dominated

TEST(SimGridReplay, ContendingCollectivesShareLinks) {
  // Two identical all-reduces at once on the same ranks take twice as long as one.
  network::Platform pf(test::flat_cluster(8));
  taskgraph::TaskGraph g;
  g.num_ranks = 8;
  std::vector<int> ranks{0, 1, 2, 3, 4, 5, 6, 7};
  int grp = g.add_group(ranks);
  const double bytes = 4e9;
  g.add_collective({taskgraph::CollectiveOp::AllReduce, taskgraph::Algorithm::Ring, {grp}, bytes}, "a", {});
  g.add_collective({taskgraph::CollectiveOp::AllReduce, taskgraph::Algorithm::Ring, {grp}, bytes}, "b", {});
  std::vector<double> none;
  auto t = replay::replay_simgrid({g, none, pf});
  double bw_part = 2.0 * 7 / 8 * bytes / 25e9;
  EXPECT_NEAR(t.makespan / (2 * bw_part + 14 * 5e-6), 1.0, 0.01);
  auto b = replay::step_breakdown(g, t, none, none);
  EXPECT_NEAR(b.total(), t.makespan, 1e-12);
}

TEST(SimGridPhases, HalvingDoublingMatchesClosedForm) {
  network::Platform pf(test::flat_cluster(64));
  taskgraph::TaskGraph g;
  g.num_ranks = 64;
  std::vector<int> ranks;
  for (int i = 0; i < 64; ++i) ranks.push_back(i);
  int grp = g.add_group(ranks);
  g.add_collective({taskgraph::CollectiveOp::AllReduce, taskgraph::Algorithm::HalvingDoubling, {grp}, 1e9}, "hd", {});
  std::vector<double> none;
  auto t = replay::replay_simgrid({g, none, pf});
  EXPECT_NEAR(t.makespan / (2 * 6 * 5e-6 + 2.0 * 63 / 64 * 1e9 / 25e9), 1.0, 0.01);
}

namespace {

// One ring all-reduce on every GPU of `c`, replayed on SimGrid and priced analytically.
std::pair<double, double> both_backends(const network::ClusterSpec& c, double bytes,
                                        taskgraph::Algorithm a = taskgraph::Algorithm::Ring,
                                        taskgraph::CollectiveOp op = taskgraph::CollectiveOp::AllReduce) {
  network::Platform pf(c);
  taskgraph::TaskGraph g;
  g.num_ranks = c.num_gpus();
  std::vector<int> ranks;
  for (int i = 0; i < c.num_gpus(); ++i) ranks.push_back(i);
  int grp = g.add_group(ranks);
  g.add_collective({op, a, {grp}, bytes}, "ar", {});
  std::vector<double> none;
  const double analytical = network::analytical_time(pf, network::lower(pf, op, a, bytes, ranks));
  return {replay::replay_simgrid({g, none, pf}).makespan, analytical};
}

network::ClusterSpec topology_node(network::Fabric f) {
  network::ClusterSpec c = test::flat_cluster(2);
  c.gpus_per_node = 4;
  c.nics_per_node = 4;
  c.fabric = f;
  c.topology = network::Topology::RailOptimized;
  c.oversubscription = 4;
  return c;
}

}  // namespace

TEST(SimGridRing, EightChannelsOver64NodesAgreeWithTheAnalyticalModel) {
  // 512 GPUs, 8 NICs per node: 8 channels of 512 hops, each run as 8 chains of 64.
  network::ClusterSpec c = test::flat_cluster(64);
  c.gpus_per_node = 8;
  c.nics_per_node = 8;
  auto [simgrid, analytical] = both_backends(c, 1e9);
  EXPECT_NEAR(simgrid / analytical, 1.0, 0.01);
  // A chunk pays the 2 x 511 hops it crosses at the ring's mean hop: 64 of 512 cross nodes.
  const double mean_hop = (64 * 5e-6 + 448 * c.intra_latency) / 512;
  EXPECT_NEAR(analytical, 2.0 * 511 / 512 * 1e9 / 8 / 25e9 + 2 * 511 * mean_hop, 1e-9);
}

TEST(SimGridTree, PipelinedDoubleTreeOver64NodesAgreesWithTheAnalyticalModel) {
  // Each NIC carries 4 of the 16 tree shares (inner in one tree, leaf in the other): S/4 at 25 GB/s.
  network::ClusterSpec c = test::flat_cluster(64);
  c.gpus_per_node = 8;
  c.nics_per_node = 8;
  auto [simgrid, analytical] = both_backends(c, 1e9, taskgraph::Algorithm::Tree);
  EXPECT_NEAR(simgrid / analytical, 1.0, 0.01);
  EXPECT_NEAR(analytical, 1e9 / 4 / 25e9, 1e-3);
}

// Issue 25: a broadcast or reduce on 8 nodes of 8 GPUs is one chain per NIC, S/8 each (SimGrid
// runs once per process: one test each).
void expect_chains_agree(taskgraph::CollectiveOp op) {
  network::ClusterSpec c = test::flat_cluster(8);
  c.gpus_per_node = 8;
  c.nics_per_node = 8;
  auto [simgrid, analytical] = both_backends(c, 1e9, taskgraph::Algorithm::Ring, op);
  EXPECT_NEAR(simgrid / analytical, 1.0, 0.01);
  EXPECT_NEAR(analytical, 1e9 / (8 * 25e9) + 8 * 5e-6 + 55 * 2e-6, 1e-9);
}
TEST(SimGridBroadcast, ChainsOnEveryNicAgreeWithTheAnalyticalModel) { expect_chains_agree(taskgraph::CollectiveOp::Broadcast); }
TEST(SimGridReduce, ChainsOnEveryNicAgreeWithTheAnalyticalModel) { expect_chains_agree(taskgraph::CollectiveOp::Reduce); }

TEST(SimGridTopology, NvlinkRingNodesAgreeWithTheAnalyticalModel) {
  auto [simgrid, analytical] = both_backends(topology_node(network::Fabric::NvLinkRing), 1e9);
  EXPECT_NEAR(simgrid / analytical, 1.0, 0.01);
}

TEST(SimGridTopology, PcieNodesAndRailsAgreeWithTheAnalyticalModel) {
  auto [simgrid, analytical] = both_backends(topology_node(network::Fabric::Pcie), 1e9);
  EXPECT_NEAR(simgrid / analytical, 1.0, 0.01);
}

TEST(SimGridTopology, CrossRailTrafficClimbsThroughTheSpine) {
  // GPU 0 (rail 0) sends to GPU 4 of the next node (rail 0), then to GPU 5 (rail 1).
  network::ClusterSpec c = topology_node(network::Fabric::NvSwitch);
  c.oversubscription = 16;  // rail uplinks of 2 x 25 / 16 GB/s
  network::Platform pf(c);
  taskgraph::TaskGraph g;
  g.num_ranks = c.num_gpus();
  int same = g.add_group({0, 4}), cross = g.add_group({0, 5});
  int a = g.add_collective({taskgraph::CollectiveOp::SendRecv, taskgraph::Algorithm::Ring, {same}, 1e9}, "same rail", {});
  int b = g.add_collective({taskgraph::CollectiveOp::SendRecv, taskgraph::Algorithm::Ring, {cross}, 1e9}, "cross", {a});
  std::vector<double> none;
  auto t = replay::replay_simgrid({g, none, pf});
  const double same_s = t.end[static_cast<std::size_t>(a)] - t.start[static_cast<std::size_t>(a)];
  const double cross_s = t.end[static_cast<std::size_t>(b)] - t.start[static_cast<std::size_t>(b)];
  EXPECT_NEAR(same_s, 1e9 / 25e9 + 5e-6, 1e-6);
  EXPECT_NEAR(cross_s, 1e9 / (2 * 25e9 / 16) + 5e-6, 1e-6);
}

TEST(SimGridAsync, ABusyServerSetsThePace) {
  // One dedicated server at 50 GB/s applies Adam for 8 workers (2 + 2 x 12 bytes of traffic per
  // 2-byte gradient): t = 13 x 2 x params / 50 GB/s per update, longer than a worker's step T.
  // The server's CPU is shared by the updates in hand, so the 8 equal workers stay in lockstep:
  // compute T, then all 8 updates together in 8t. 64 samples per T + 8t.
  test::TempDir dir;
  dir.file("base.json", test::kValidScenario);
  auto s = config::load_scenario(dir.file("s.json", R"({"extends": "base.json", "hardware": {"host_memory_bandwidth_GBps": 50},
      "cluster": {"parameter_servers": {"count": 1, "nic_bandwidth_GBps": 1e6}, "inter_node": {"nic_bandwidth_GBps": 1e6}},
      "parallelism": {"data": 8, "micro_batch_size": 4, "updates": "async"}})"));
  auto r = results::simulate(s);
  const double t = 13 * 2 * r.params / 50e9, step = r.breakdown.compute;
  EXPECT_GT(8 * t, 4 * step);  // the server, not the workers, sets the pace
  EXPECT_NEAR(r.samples_per_s / (64 / (step + 8 * t)), 1.0, 0.02);
}

TEST(SimGridStream, TheWaitingOneWithTheLowestPriorityGoesNext) {
  const auto g = test::three_on_a_stream();
  const std::vector<double> seconds{1e-3, 2e-3};
  const network::Platform pf(test::flat_cluster(8));
  const auto t = replay::replay_simgrid({g, seconds, pf});
  const double one = t.end[2] - t.start[2];
  ASSERT_GT(one, 2e-3);
  EXPECT_DOUBLE_EQ(t.start[4], t.end[2]);  // "c" (priority 1) before "b" (priority 3)
  EXPECT_DOUBLE_EQ(t.start[3], t.end[4]);
  EXPECT_NEAR(t.makespan / (3 * one), 1.0, 1e-9);
}
