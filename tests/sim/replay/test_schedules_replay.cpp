// Issue 17 item 4: the new pipeline schedules replay on SimGrid as on the analytical backend.
// Each test runs in its own process (gtest_discover_tests): SimGrid's engine runs once per process.
#include <gtest/gtest.h>

#include "helpers.hpp"
#include "sim/config/scenario.hpp"
#include "sim/results/result.hpp"

using namespace dtsim;

namespace {

void expect_backends_agree(const std::string& schedule) {
  const auto path = test::source_dir() + "/scenarios/pipeline/schedules-" + schedule + ".json";
  auto s = config::load_scenario(path);
  s.backend = config::Backend::SimGrid;
  const auto sg = results::simulate(s);
  s.backend = config::Backend::Analytical;
  const auto an = results::simulate(s);
  EXPECT_EQ(sg.timeline.backend, "simgrid");
  EXPECT_GT(sg.timeline.flows, 0u);
  // One stage-to-stage transfer at a time per link: no contention for the two to differ on.
  EXPECT_NEAR(sg.step_time_s / an.step_time_s, 1.0, 0.02) << schedule;
  EXPECT_NEAR(sg.breakdown.pipeline_bubble, an.breakdown.pipeline_bubble, 0.02 * sg.step_time_s) << schedule;
}

}  // namespace

TEST(SchedulesReplay, PipeDreamOnSimGrid) { expect_backends_agree("pipedream"); }
TEST(SchedulesReplay, PipeDream2BWOnSimGrid) { expect_backends_agree("pipedream-2bw"); }
TEST(SchedulesReplay, ZeroBubbleH1OnSimGrid) { expect_backends_agree("zero-bubble-h1"); }
