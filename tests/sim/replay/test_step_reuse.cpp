// Issue 18, item 4: repeated identical steps are replayed once (or twice, when a step overlaps
// the next) and the others derived (replay::StepReuse). Each derived result must equal the full
// replay (DTSIM_FULL_REPLAY=1) to 1e-9. The analytical replay runs in this process; SimGrid's
// engine runs once per process, so the SimGrid cases run the dtsim binary twice.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "helpers.hpp"
#include "sim/config/scenario.hpp"
#include "sim/results/result.hpp"

using namespace dtsim;

namespace {

// The scenario at `path` (under scenarios/) over `steps` steps on `backend`.
std::string over(const test::TempDir& dir, const std::string& path, int steps, const std::string& backend) {
  return dir.file("s.json", R"({"extends": ")" + test::source_dir() + "/scenarios/" + path + R"(",
      "simulation": {"steps": )" + std::to_string(steps) + R"(, "backend": ")" + backend + R"("}})");
}

struct FullReplay {  // DTSIM_FULL_REPLAY=1 while it lives
  FullReplay() { ::setenv("DTSIM_FULL_REPLAY", "1", 1); }
  ~FullReplay() { ::unsetenv("DTSIM_FULL_REPLAY"); }
};

bool close(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max({std::abs(a), std::abs(b), 1e-300}); }

// Every task's start and end, the step times and the breakdown: the same to 1e-9 (the breakdown's
// parts to 1e-9 of the step, where a zero may come out as rounding).
void expect_same(const results::Result& derived, const results::Result& full) {
  ASSERT_EQ(derived.timeline.start.size(), full.timeline.start.size());
  for (std::size_t i = 0; i < full.timeline.start.size(); ++i) {
    ASSERT_TRUE(close(derived.timeline.start[i], full.timeline.start[i])) << "task " << i << " start";
    ASSERT_TRUE(close(derived.timeline.end[i], full.timeline.end[i])) << "task " << i << " end";
  }
  ASSERT_TRUE(derived.steps && full.steps);
  ASSERT_EQ(derived.steps->step_times.size(), full.steps->step_times.size());
  for (std::size_t k = 0; k < full.steps->step_times.size(); ++k)
    EXPECT_TRUE(close(derived.steps->step_times[k], full.steps->step_times[k])) << "step " << k;
  EXPECT_TRUE(close(derived.step_time_s, full.step_time_s));
  EXPECT_TRUE(close(derived.steps->mean_wait_s, full.steps->mean_wait_s));
  EXPECT_EQ(derived.steps->critical, full.steps->critical);
  EXPECT_EQ(derived.timeline.flows, full.timeline.flows);
  const auto& a = derived.breakdown;
  const auto& b = full.breakdown;
  const double tol = 1e-9 * full.step_time_s;
  EXPECT_NEAR(a.compute, b.compute, tol);
  EXPECT_NEAR(a.exposed_communication, b.exposed_communication, tol);
  EXPECT_NEAR(a.pipeline_bubble, b.pipeline_bubble, tol);
  EXPECT_NEAR(a.optimizer, b.optimizer, tol);
  EXPECT_NEAR(a.straggler_wait, b.straggler_wait, tol);
  EXPECT_NEAR(a.input_stall, b.input_stall, tol);
  EXPECT_NEAR(a.stage_imbalance, b.stage_imbalance, tol);
}

// Replays `path` over `steps` analytically, derived and in full; returns the steps replayed.
int analytical_matches_full(const std::string& path, int steps) {
  test::TempDir dir;
  const auto s = config::load_scenario(over(dir, path, steps, "analytical"));
  const auto derived = results::simulate(s);
  results::Result full;
  {
    FullReplay force;
    full = results::simulate(s);
  }
  EXPECT_EQ(full.timeline.steps_replayed, steps);
  expect_same(derived, full);
  return derived.timeline.steps_replayed;
}

nlohmann::json run_cli(const std::string& scenario, const test::TempDir& dir, bool full) {
  const std::string out = dir.path(full ? "full.json" : "derived.json");
  const std::string cmd = std::string(full ? "DTSIM_FULL_REPLAY=1 " : "") + DTSIM_BINARY + " run " + scenario +
                          " --format json -o " + dir.path(full ? "full" : "derived") + " > " + out;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(out);
  return nlohmann::json::parse(in);
}

// Every number of result.json but the wall time and the steps replayed: the same to 1e-9 (a
// breakdown part to 1e-9 of the step).
void expect_same_json(const nlohmann::json& a, const nlohmann::json& b, double step, const std::string& at = "") {
  if (a.is_object()) {
    ASSERT_TRUE(b.is_object()) << at;
    for (auto it = a.begin(); it != a.end(); ++it) {
      if (it.key() == "wall_time_s" || it.key() == "steps_replayed") continue;
      ASSERT_TRUE(b.contains(it.key())) << at << "/" << it.key();
      expect_same_json(it.value(), b[it.key()], step, at + "/" + it.key());
    }
  } else if (a.is_array()) {
    ASSERT_EQ(a.size(), b.size()) << at;
    for (std::size_t k = 0; k < a.size(); ++k) expect_same_json(a[k], b[k], step, at + "/" + std::to_string(k));
  } else if (a.is_number_float() || b.is_number_float()) {
    const double x = a.get<double>(), y = b.get<double>();
    const bool part = at.rfind("/breakdown_s/", 0) == 0;
    EXPECT_TRUE(part ? std::abs(x - y) <= 1e-9 * step : close(x, y)) << at << ": " << x << " vs " << y;
  } else {
    EXPECT_EQ(a, b) << at;
  }
}

int simgrid_matches_full(const std::string& path, int steps) {
  test::TempDir dir;
  const std::string s = over(dir, path, steps, "simgrid");
  const auto derived = run_cli(s, dir, false);
  const auto full = run_cli(s, dir, true);
  EXPECT_EQ(full["simulation"]["steps_replayed"], steps);
  expect_same_json(derived, full, full["step_time_s"].get<double>());
  return derived["simulation"]["steps_replayed"].get<int>();
}

}  // namespace

// Data parallel: every GPU ends its step at the all-reduce and optimizer, so step 0 is over when
// step 1 begins and one step is replayed.
TEST(StepReuse, DataParallelReplaysOneStepAnalytical) { EXPECT_EQ(analytical_matches_full("gpt2-dp64-a100.json", 6), 1); }
TEST(StepReuse, DataParallelReplaysOneStepSimGrid) { EXPECT_EQ(simgrid_matches_full("gpt2-dp64-a100.json", 6), 1); }

// An 8-stage 1F1B pipeline with one slow GPU.
TEST(StepReuse, PipelineAnalytical) { EXPECT_EQ(analytical_matches_full("stragglers/pp8-one-slow-gpu.json", 5), 1); }
TEST(StepReuse, PipelineSimGrid) { EXPECT_EQ(simgrid_matches_full("stragglers/pp8-one-slow-gpu.json", 5), 1); }
TEST(StepReuse, InterleavedPipelineAnalytical) { EXPECT_LE(analytical_matches_full("pipeline/gpt3-175b-1f1b.json", 4), 2); }

// Priority buckets: the next forward starts while the last buckets are still being reduced and
// updated, so two steps are replayed and the state at step 2's start matched with step 1's.
TEST(StepReuse, OverlappingStepsReplayTwoAnalytical) { EXPECT_EQ(analytical_matches_full("priority/ddp-100g-priority.json", 6), 2); }
TEST(StepReuse, OverlappingStepsReplayTwoSimGrid) { EXPECT_EQ(simgrid_matches_full("priority/ddp-100g-priority.json", 6), 2); }

// A data loader slower than the GPU: the first step waits for empty loaders, the later ones
// repeat the second.
TEST(StepReuse, InputStallAnalytical) { EXPECT_EQ(analytical_matches_full("input-stall-gpt2.json", 4), 2); }

// Backup workers: the slow GPU's dropped replica falls further behind every step, no state
// repeats, and the replay runs every step, as before.
TEST(StepReuse, DriftingStepsReplayEveryStepSimGrid) {
  EXPECT_EQ(simgrid_matches_full("stragglers/dp64-one-slow-gpu-backup.json", 5), 5);
}

// Jitter draws every step anew: every step is replayed.
TEST(StepReuse, JitterReplaysEveryStep) {
  test::TempDir dir;
  const auto r = results::simulate(config::load_scenario(over(dir, "stragglers/dp1024-jitter.json", 3, "analytical")));
  EXPECT_EQ(r.timeline.steps_replayed, 3);
}

// GPT-3 175B on 1,024 A100s (the speed goal's case): ten steps replay one.
TEST(StepReuse, Gpt3On1024GpusReplaysOneOfTenSteps) {
  EXPECT_EQ(analytical_matches_full("hybrid/gpt3-175b-1024-a100.json", 10), 1);
}
