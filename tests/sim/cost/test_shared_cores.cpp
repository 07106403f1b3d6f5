// Issue 15 item 4: shared cores. A CPU device's collectives progress on its own cores, so compute
// overlapping them runs at 1 - comm_core_share of its speed.
#include <gtest/gtest.h>

#include <cstdio>

#include "helpers.hpp"
#include "shared_cores_case.hpp"
#include "sim/config/scenario.hpp"
#include "sim/results/result.hpp"

using namespace dtsim;

TEST(SharedCores, ComputeOverlappingACollectiveLosesItsShareAnalytical) {
  test::SharedCoresCase c;
  const auto t = replay::replay_analytical(c.input(0.5));
  const auto i = [](int task) { return static_cast<std::size_t>(task); };
  const double comm = t.end[i(c.send)] - t.start[i(c.send)];
  EXPECT_NEAR(comm, 12.5e9 / 25e9, 1e-4);  // the link's time (plus its 5 us latency)
  // By hand: [0, T] at half speed does T/2 of the work, the rest at full speed: 1 + T/2.
  EXPECT_NEAR(t.end[i(c.overlapped)], 1.0 + 0.5 * comm, 1e-12);
  EXPECT_NEAR(t.end[i(c.apart)], 1.0, 1e-12);              // GPU 2 takes no part
  EXPECT_NEAR(t.end[i(c.after)] - t.start[i(c.after)], 1.0, 1e-12);  // after the transfer: full speed
  // Without a share, the old replay: every task lasts its own price.
  const auto free = replay::replay_analytical(c.input(0.0));
  EXPECT_NEAR(free.end[i(c.overlapped)], 1.0, 1e-12);
  EXPECT_NEAR(t.makespan - free.makespan, 0.0, 1e-12);  // GPU 1's chain still ends last at T + 1
}

TEST(SharedCores, TheCpuProfileGivesCollectivesACoreAndTheStepGrows) {
  const std::string cpu = test::source_dir() + "/scenarios/cpu/tiny-gpt-cpu.json";
  test::TempDir dir;
  auto s = config::load_scenario(dir.file("s.json", R"({"extends": ")" + cpu + R"(",
    "cluster": {"nodes": 2}, "parallelism": {"data": 2}, "simulation": {"backend": "analytical"}})"));
  EXPECT_EQ(s.device.comm_core_share, 0.5);  // hardware_profiles/cpu-epyc-2core.json
  const auto shared = results::simulate(s);
  s.device.comm_core_share = 0;
  const auto free = results::simulate(s);
  EXPECT_GT(shared.step_time_s, free.step_time_s);
  std::printf("tiny-gpt, 2 CPU nodes data-parallel: step %.6f s with shared cores, %.6f s without\n", shared.step_time_s,
              free.step_time_s);
  const auto& b = shared.breakdown;
  EXPECT_NEAR(b.total(), shared.step_time_s, 1e-9 * shared.step_time_s);
  for (double part : {b.compute, b.exposed_communication, b.pipeline_bubble, b.optimizer, b.straggler_wait, b.input_stall,
                      b.stage_imbalance})
    EXPECT_GE(part, 0.0);
}

TEST(SharedCores, TheBreakdownChargesTheCollectivesShareToCommunication) {
  test::SharedCoresCase c;
  const auto t = replay::replay_analytical(c.input(0.5));
  const double comm = t.end[static_cast<std::size_t>(c.send)] - t.start[static_cast<std::size_t>(c.send)];
  const std::vector<double> none(c.graph.works.size(), 0.0);
  // GPU 0 is busy 1 + T/2 seconds: its 1 s of compute and, beside the transfer, T/2 of progress.
  const auto b = replay::step_breakdown(c.graph, t, c.seconds, none, {.rank = 0, .horizon = t.end[0], .comm_core_share = 0.5});
  EXPECT_NEAR(b.compute, 1.0, 1e-9);
  EXPECT_NEAR(b.exposed_communication, 0.5 * comm, 1e-9);
  EXPECT_NEAR(b.total(), t.end[0], 1e-9);
}
