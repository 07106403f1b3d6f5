// Issue 18, item 3: compute whose duration is fixed before the replay runs as a timer in
// SimGrid's timer heap instead of an Exec activity, wherever nothing else can share its GPU.
// Each test runs in its own process (gtest_discover_tests): SimGrid's engine runs once per process.
#include <gtest/gtest.h>

#include "helpers.hpp"
#include "sim/network/collectives.hpp"
#include "sim/replay/replay.hpp"

using namespace dtsim;

namespace {

// `chain` compute tasks one after another on each of `ranks` GPUs, with durations that are not
// round in binary and differ between GPUs, then one all-reduce over all of them.
struct Chains {
  taskgraph::TaskGraph g;
  std::vector<double> seconds;
  Chains(int ranks, int chain) {
    g.num_ranks = ranks;
    std::vector<int> all, last;
    for (int r = 0; r < ranks; ++r) all.push_back(r);
    const int grp = g.add_group(all);
    // Every GPU's passes differ, so that its tasks end while other GPUs' are half done.
    for (int r = 0; r < ranks; ++r)
      for (int k = 0; k < chain; ++k) {
        taskgraph::Work w;
        w.name = "pass " + std::to_string(k) + " on " + std::to_string(r);
        g.add_work(w);
        seconds.push_back(1e-3 / 3.0 * (1.0 + 0.1 * k) * (1.0 + 0.037 * r));
      }
    for (int r = 0; r < ranks; ++r) {
      int prev = -1;
      for (int k = 0; k < chain; ++k)
        prev = g.add_compute(r, r * chain + k, taskgraph::Category::Compute, "pass",
                             prev < 0 ? std::vector<int>{} : std::vector<int>{prev});
      last.push_back(prev);
    }
    g.add_collective({taskgraph::CollectiveOp::AllReduce, taskgraph::Algorithm::Ring, {grp}, 1e6}, "ar", last);
  }
};

}  // namespace

// A timer ends exactly where its duration says, as the analytical replay's events do; an Exec
// ended wherever SimGrid's remaining-work arithmetic rounded it.
TEST(TimerReplay, ComputeEndsExactlyWhereTheAnalyticalReplayEndsIt) {
  network::Platform pf(test::flat_cluster(8));
  Chains c(8, 40);
  const auto analytical = replay::replay_analytical({c.g, c.seconds, pf});
  const auto simgrid = replay::replay_simgrid({c.g, c.seconds, pf});
  for (std::size_t i = 0; i < c.g.tasks.size(); ++i)
    if (!c.g.tasks[i].is_collective) {
      EXPECT_EQ(simgrid.start[i], analytical.start[i]) << i;
      EXPECT_EQ(simgrid.end[i], analytical.end[i]) << i;
    }
}

// Two tasks on one GPU at once still share it (here: a second task beside the chain, as
// gradient compression runs beside backward): each runs at half speed while both run.
TEST(TimerReplay, TasksThatOverlapOnAGpuStillShareIt) {
  network::Platform pf(test::flat_cluster(2));
  taskgraph::TaskGraph g;
  g.num_ranks = 2;
  taskgraph::Work w;
  w.name = "w";
  g.add_work(w);
  const int a = g.add_compute(0, 0, taskgraph::Category::Compute, "a", {});
  g.add_compute(0, 0, taskgraph::Category::Communication, "beside a", {});
  g.add_compute(0, 0, taskgraph::Category::Compute, "after a", {a});
  std::vector<double> seconds{1.0};
  const auto t = replay::replay_simgrid({g, seconds, pf});
  EXPECT_NEAR(t.end[0], 2.0, 1e-9);  // both at half speed for 2 s
  EXPECT_NEAR(t.end[2], 3.0, 1e-9);
}
