// Issue 15 item 4 on SimGrid: the hand-computed shared-cores case, as the analytical replay.
// Each test runs in its own process (gtest_discover_tests): SimGrid's engine runs once per process.
#include <gtest/gtest.h>

#include "shared_cores_case.hpp"

using namespace dtsim;

TEST(SharedCoresSimGrid, ComputeOverlappingACollectiveLosesItsShare) {
  test::SharedCoresCase c;
  const auto t = replay::replay_simgrid(c.input(0.5));
  const auto i = [](int task) { return static_cast<std::size_t>(task); };
  const double comm = t.end[i(c.send)] - t.start[i(c.send)];
  EXPECT_NEAR(comm, 12.5e9 / 25e9, 1e-4);
  EXPECT_NEAR(t.end[i(c.overlapped)], 1.0 + 0.5 * comm, 1e-6);
  EXPECT_NEAR(t.end[i(c.apart)], 1.0, 1e-6);
  EXPECT_NEAR(t.end[i(c.after)] - t.start[i(c.after)], 1.0, 1e-6);
}

TEST(SharedCoresSimGrid, AQuarterShare) {
  test::SharedCoresCase c;
  const auto t = replay::replay_simgrid(c.input(0.25));
  const auto i = [](int task) { return static_cast<std::size_t>(task); };
  const double comm = t.end[i(c.send)] - t.start[i(c.send)];
  EXPECT_NEAR(t.end[i(c.overlapped)], 1.0 + 0.25 * comm, 1e-6);
}
