#include <gtest/gtest.h>

#include "sim/network/algorithms.hpp"
#include "sim/network/collectives.hpp"
#include "sim/replay/replay.hpp"

#include "helpers.hpp"

// Each test runs in its own process (gtest_discover_tests): SimGrid's engine runs once per process.
using namespace dtsim;

namespace {

// The all-reduce over `groups` of chips of a torus at once (every chip where none are given),
// replayed on SimGrid.
double simgrid_torus_all_reduce(std::vector<int> dims, double bytes, double bandwidth, double latency,
                                std::vector<std::vector<int>> groups = {}, int pods = 1) {
  network::ClusterSpec c = test::flat_cluster(1);
  int chips = pods;
  for (int d : dims) chips *= d;
  c.torus_pods = pods;
  c.gpus_per_node = 4;
  c.nodes = chips / 4;
  c.topology = dims.size() == 2 ? network::Topology::Torus2D : network::Topology::Torus3D;
  c.torus_dims = dims;
  c.torus_link_bandwidth = bandwidth;
  c.torus_link_latency = latency;
  network::Platform pf(c);
  taskgraph::TaskGraph g;
  g.num_ranks = chips;
  if (groups.empty()) {
    groups.emplace_back();
    for (int i = 0; i < chips; ++i) groups.back().push_back(i);
  }
  std::vector<int> ids;
  for (const auto& r : groups) ids.push_back(g.add_group(r));
  g.add_collective({taskgraph::CollectiveOp::AllReduce, taskgraph::Algorithm::Auto, ids, bytes}, "ar", {});
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

// Four tensor-parallel lines along x of a 4 x 4 torus all-reduce at once: each runs its own
// bidirectional ring on its own links, in the time of one line's closed form.
TEST(SimGridTorus, LinesAlongOneDimensionAllReduceSideBySide) {
  const double expected = network::algorithms::torus_closed_form({4}, 1e8, 2, 1e-6, 82e9);
  const std::vector<std::vector<int>> lines{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}};
  EXPECT_NEAR(simgrid_torus_all_reduce({4, 4}, 1e8, 82e9, 1e-6, lines) / expected, 1.0, 0.01);
}

// Two 4 x 4 pods: a pair of chips of different pods all-reduces through their hosts' NICs (25 GB/s,
// a ring of two: 100 MB each way in all); a line of the second pod runs on its own torus links.
TEST(SimGridTorus, PodsMeetThroughTheirHostsNics) {
  EXPECT_NEAR(simgrid_torus_all_reduce({4, 4}, 1e8, 82e9, 1e-6, {{0, 16}}, 2) / (1e8 / 25e9), 1.0, 0.01);
}

TEST(SimGridTorus, ALineOfTheSecondPodRunsOnItsOwnLinks) {
  const double line = network::algorithms::torus_closed_form({4}, 1e8, 2, 1e-6, 82e9);
  EXPECT_NEAR(simgrid_torus_all_reduce({4, 4}, 1e8, 82e9, 1e-6, {{16, 17, 18, 19}}, 2) / line, 1.0, 0.01);
}
