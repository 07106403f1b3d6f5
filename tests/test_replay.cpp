#include <gtest/gtest.h>

#include "sim/network/collectives.hpp"
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
