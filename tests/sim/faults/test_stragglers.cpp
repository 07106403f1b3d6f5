#include <gtest/gtest.h>

#include "helpers.hpp"
#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "sim/results/result.hpp"
#include "strategies/placement.hpp"

using namespace dtsim;

namespace {

// GPT-2 small, synchronous data parallelism over 64 GPUs, replayed analytically (several runs fit
// in one process).
results::Result run(const std::string& extra) {
  test::TempDir dir;
  dir.file("base.json", test::kValidScenario);
  std::string f = dir.file("s.json", R"({"extends": "base.json", "cluster": {"nodes": 8},
      "parallelism": {"data": 64, "micro_batch_size": 8}, "training": {"global_batch_size": 512},
      "simulation": {"backend": "analytical")" + extra + "}}");
  return results::simulate(config::load_scenario(f));
}

double harmonic(int n) {
  double h = 0;
  for (int k = 1; k <= n; ++k) h += 1.0 / k;
  return h;
}

}  // namespace

TEST(Stragglers, ExponentialJitterSlowsBySlowestOfNDraws) {
  const double mu = 0.1;
  auto calm = run("}, \"stragglers\": {\"seed\": 3");
  auto noisy = run(", \"steps\": 300}, \"stragglers\": {\"seed\": 3, \"jitter\": {\"distribution\": \"exponential\", \"mean\": 0.1}");
  // Every GPU's compute is T (1 + X), X ~ Exp(mu); the step waits for the slowest of 64, whose
  // expectation is T (1 + mu H_64) (H_n the harmonic number).
  const double t_compute = calm.breakdown.compute;
  const double slowdown = noisy.steps->mean - calm.step_time_s;
  EXPECT_NEAR(slowdown / (t_compute * mu * harmonic(64)), 1.0, 0.08);
  EXPECT_GT(noisy.steps->p99, noisy.steps->p50);
}

TEST(Stragglers, SameSeedSameStepsOtherSeedOtherSteps) {
  const std::string jitter = ", \"steps\": 5}, \"stragglers\": {\"jitter\": {\"distribution\": \"lognormal\", \"sigma\": 0.2}, \"seed\": ";
  auto a = run(jitter + "11"), b = run(jitter + "11"), c = run(jitter + "12");
  EXPECT_EQ(a.steps->step_times, b.steps->step_times);
  EXPECT_NE(a.steps->step_times, c.steps->step_times);
}

TEST(Stragglers, OneSlowGpuSetsThePaceAndIsNamed) {
  auto calm = run("}, \"stragglers\": {\"seed\": 1");
  auto slow = run(", \"steps\": 4}, \"stragglers\": {\"slow_gpus\": [{\"gpu\": 13, \"slowdown\": 1.5}]");
  EXPECT_NEAR(slow.step_time_s - calm.step_time_s, 0.5 * calm.breakdown.compute, 0.02 * calm.step_time_s);
  ASSERT_FALSE(slow.steps->critical.empty());
  EXPECT_EQ(slow.steps->critical.front(), std::make_pair(13, 4));
  EXPECT_GT(slow.breakdown.straggler_wait, 0.0);
}

// Tensor parallelism 2 over the 64 GPUs (data 32): GPU 5 is tensor rank 1 of the group {4, 5},
// whose compute stands on GPU 4. The two run every layer in lockstep (its all-reduces wait for
// both), so GPU 5 at 1.5x slows the step exactly as GPU 4 at 1.5x does, and is named.
TEST(Stragglers, ASlowTensorRankSlowsItsGroupAsTheFirstRankDoes) {
  auto tp2 = [](const std::string& stragglers) {
    test::TempDir dir;
    dir.file("base.json", test::kValidScenario);
    std::string f = dir.file("s.json", R"({"extends": "base.json", "cluster": {"nodes": 8},
        "parallelism": {"data": 32, "tensor": 2, "micro_batch_size": 8}, "training": {"global_batch_size": 256},
        "simulation": {"backend": "analytical", "steps": 3}, "stragglers": )" + stragglers + "}");
    return results::simulate(config::load_scenario(f));
  };
  auto calm = tp2(R"({"seed": 1})");
  auto first = tp2(R"({"slow_gpus": [{"gpu": 4, "slowdown": 1.5}]})");
  auto second = tp2(R"({"slow_gpus": [{"gpu": 5, "slowdown": 1.5}]})");
  EXPECT_GT(second.step_time_s, calm.step_time_s + 0.4 * calm.breakdown.compute);
  EXPECT_DOUBLE_EQ(second.step_time_s, first.step_time_s);
  EXPECT_DOUBLE_EQ(second.breakdown.straggler_wait, first.breakdown.straggler_wait);
  ASSERT_FALSE(second.steps->critical.empty());
  EXPECT_EQ(second.steps->critical.front(), std::make_pair(5, 3));
  EXPECT_EQ(first.steps->critical.front(), std::make_pair(4, 3));
  // Both members slow: the slower sets the pace (slowdowns of one GPU multiply, of a group do not).
  auto both = tp2(R"({"slow_gpus": [{"gpu": 4, "slowdown": 1.2}, {"gpu": 5, "slowdown": 1.5}]})");
  EXPECT_DOUBLE_EQ(both.step_time_s, first.step_time_s);
}

TEST(Stragglers, ABackupWorkerStopsTheSlowGpuSettingThePace) {
  auto calm = run("}, \"stragglers\": {\"seed\": 1");
  auto slow = run(", \"steps\": 6}, \"stragglers\": {\"slow_gpus\": [{\"gpu\": 13, \"slowdown\": 1.5}]");
  auto backup = run(", \"steps\": 6}, \"stragglers\": {\"backup_workers\": 1, \"slow_gpus\": [{\"gpu\": 13, \"slowdown\": 1.5}]");
  EXPECT_GT(slow.step_time_s, 1.3 * calm.step_time_s);
  EXPECT_NEAR(backup.step_time_s / calm.step_time_s, 1.0, 0.02);
}

TEST(Rebalance, SlowStagesGetFewerBlocksSoNoStageTakesLonger) {
  // A 2x slow stage among four, 16 blocks: the min-max split gives it 2 (time 4) and keeps every
  // other stage at 5 or less, instead of 4 x 2 = 8 for the slow stage of an even split.
  EXPECT_EQ(strategies::balance_stages(16, {1, 2, 1, 1}), (std::vector<int>{5, 2, 5, 4}));
  EXPECT_EQ(strategies::balance_stages(16, {1, 1, 1, 1}), (std::vector<int>{4, 4, 4, 4}));
  EXPECT_EQ(strategies::balance_stages(4, {1, 3, 1, 1}), (std::vector<int>{1, 1, 1, 1}));  // at least one each
}

TEST(Rebalance, RebalancedPipelineRecoversMostOfTheSlowGpusLoss) {
  auto step = [](const std::string& name, const std::string& extra) {
    test::TempDir dir;
    std::string f = dir.file("s.json", R"({"extends": ")" + test::source_dir() + "/scenarios/stragglers/" + name +
                                            R"(.json", "simulation": {"backend": "analytical", "steps": 2})" + extra + "}");
    return results::simulate(config::load_scenario(f));
  };
  auto slow = step("pp8-one-slow-gpu", "");
  auto fixed = step("pp8-one-slow-gpu-rebalanced", "");
  auto calm = step("pp8-one-slow-gpu", R"(, "stragglers": null)");
  EXPECT_EQ(fixed.plan.stage_layers, (std::vector<int>{7, 7, 6, 6, 6, 4, 6, 6}));
  // GPU 5 at 1.5x costs the even split about 15 %; with 4 blocks its stage takes 6 blocks' time.
  EXPECT_GT(slow.step_time_s / calm.step_time_s, 1.10);
  EXPECT_LT(fixed.step_time_s / calm.step_time_s, 1.03);
}

TEST(Rebalance, ExplicitStageLayersMustCoverTheModel) {
  test::TempDir dir;
  dir.file("base.json", test::kValidScenario);
  auto err = [&](const std::string& par) {
    try {
      config::load_scenario(dir.file("s.json", R"({"extends": "base.json", "parallelism": {"data": 2, "pipeline": 4)" + par + "}}"));
    } catch (const InputError& e) {
      return e.pointer();
    }
    return std::string();
  };
  EXPECT_EQ(err(R"(, "stage_layers": [3, 3, 3, 2])"), "/parallelism/stage_layers");  // 11 of 12
  EXPECT_EQ(err(R"(, "stage_layers": [6, 6])"), "/parallelism/stage_layers");
  EXPECT_EQ(err(R"(, "stage_layers": [4, 0, 4, 4])"), "/parallelism/stage_layers");
  EXPECT_EQ(err(R"(, "stage_layers": [0, 4, 4, 4])"), "");  // the first stage the embedding alone
  EXPECT_EQ(err(R"(, "stage_layers": [5, 3, 2, 2])"), "");
}
