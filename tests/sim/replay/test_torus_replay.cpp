#include <gtest/gtest.h>

#include "sim/network/algorithms.hpp"
#include "sim/network/collectives.hpp"
#include "sim/replay/replay.hpp"

#include "helpers.hpp"

// Each test runs in its own process (gtest_discover_tests): SimGrid's engine runs once per process.
using namespace dtsim;

namespace {

// The all-reduce of every chip of a torus, replayed on SimGrid.
double simgrid_torus_all_reduce(std::vector<int> dims, double bytes, double bandwidth, double latency) {
  network::ClusterSpec c = test::flat_cluster(1);
  int chips = 1;
  for (int d : dims) chips *= d;
  c.gpus_per_node = 4;
  c.nodes = chips / 4;
  c.topology = dims.size() == 2 ? network::Topology::Torus2D : network::Topology::Torus3D;
  c.torus_dims = dims;
  c.torus_link_bandwidth = bandwidth;
  c.torus_link_latency = latency;
  network::Platform pf(c);
  taskgraph::TaskGraph g;
  g.num_ranks = chips;
  std::vector<int> ranks;
  for (int i = 0; i < chips; ++i) ranks.push_back(i);
  int grp = g.add_group(ranks);
  g.add_collective({taskgraph::CollectiveOp::AllReduce, taskgraph::Algorithm::Auto, {grp}, bytes}, "ar", {});
  std::vector<double> none;
  return replay::replay_simgrid({g, none, pf}).makespan;
}

}  // namespace

TEST(SimGridTorus, TwoDimensionalAllReduceMatchesClosedForm) {
  const double expected = network::algorithms::torus_closed_form({4, 4}, 1e8, 2, 1e-6, 82e9);
  EXPECT_NEAR(simgrid_torus_all_reduce({4, 4}, 1e8, 82e9, 1e-6) / expected, 1.0, 0.01);
}

TEST(SimGridTorus, ThreeDimensionalAllReduceMatchesClosedForm) {
  const double expected = network::algorithms::torus_closed_form({4, 4, 4}, 1e9, 2, 1e-6, 50e9);
  EXPECT_NEAR(simgrid_torus_all_reduce({4, 4, 4}, 1e9, 50e9, 1e-6) / expected, 1.0, 0.01);
}
