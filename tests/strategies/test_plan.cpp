// Issue 16 item 1: the capacity plan (time to train, GPU-hours, energy, cost), the training-length
// keys other tools use, the fewest GPUs that fit, and the nearest-key suggestion.
#include <gtest/gtest.h>

#include "helpers.hpp"
#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "sim/core/suggest.hpp"
#include "sim/results/result.hpp"

using namespace dtsim;

namespace {

// The valid GPT-2 scenario (8 A100s, data 8, micro-batch 4, global batch 64, sequence 1024) with
// `training` and the rest of `extra` merged over it, on the analytical backend.
config::Scenario load(const std::string& training, const std::string& extra = "") {
  test::TempDir dir;
  dir.file("base.json", test::kValidScenario);
  return config::load_scenario(dir.file(
      "c.json", R"({"extends": "base.json", "simulation": {"backend": "analytical"}, "training": )" + training +
                    (extra.empty() ? "" : ", " + extra) + "}"));
}

std::string error_of(const std::string& training, const std::string& extra = "") {
  try {
    load(training, extra);
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error for " << training;
  return "";
}

}  // namespace

TEST(Plan, TokensGiveStepsTimeGpuHoursEnergyAndCost) {
  // 64 samples x 1024 tokens = 65,536 tokens per step; 65,536,001 tokens need 1,001 steps.
  const auto s = load(R"({"global_batch_size": 64, "tokens": 65536001})");
  EXPECT_EQ(s.steps, 1001);
  const auto r = results::simulate(s);
  ASSERT_TRUE(r.capacity);
  const auto& c = *r.capacity;
  EXPECT_EQ(c.steps, 1001);
  EXPECT_DOUBLE_EQ(c.tokens, 1001.0 * 65536);
  EXPECT_DOUBLE_EQ(c.time_s, 1001 * r.step_time_s);
  EXPECT_FALSE(c.with_faults);
  EXPECT_DOUBLE_EQ(c.gpu_hours, 8 * c.time_s / 3600);
  // The A100's 400 W TDP and its $1.89 per GPU-hour default (hardware_profiles/a100-sxm-80gb.json).
  EXPECT_DOUBLE_EQ(c.power_w, 400);
  EXPECT_DOUBLE_EQ(c.energy_kwh, c.gpu_hours * 0.4);
  EXPECT_DOUBLE_EQ(c.price_per_gpu_hour_usd, 1.89);
  EXPECT_EQ(c.price_from, "device");
  EXPECT_DOUBLE_EQ(c.cost_usd, c.gpu_hours * 1.89);
  const auto j = results::to_json(r, false);
  EXPECT_EQ(j["plan"]["steps"], 1001);
  EXPECT_DOUBLE_EQ(j["plan"]["cost_usd"].get<double>(), c.cost_usd);
  EXPECT_EQ(j["plan"]["power_basis"], "TDP");
}

TEST(Plan, ScenarioPriceOverridesTheDevices) {
  const auto r = results::simulate(load(R"({"global_batch_size": 64, "steps": 100, "price_per_gpu_hour_usd": 3})"));
  EXPECT_DOUBLE_EQ(r.capacity->price_per_gpu_hour_usd, 3);
  EXPECT_EQ(r.capacity->price_from, "scenario");
  EXPECT_DOUBLE_EQ(r.capacity->cost_usd, 8 * 100 * r.step_time_s / 3600 * 3);
}

TEST(Plan, WithFaultsTheTimeIncludesFailuresAndCheckpoints) {
  const auto r = results::simulate(load(R"({"global_batch_size": 64, "steps": 1000000})",
                                        R"("faults": {"gpu_mtbf_hours": 1000, "checkpoint_save_s": 60, "restart_s": 600})"));
  ASSERT_TRUE(r.faults && r.capacity);
  EXPECT_TRUE(r.capacity->with_faults);
  EXPECT_DOUBLE_EQ(r.capacity->time_s, r.faults->expected_time_s);
  EXPECT_GT(r.capacity->time_s, 1.01 * r.capacity->ideal_time_s);
  EXPECT_DOUBLE_EQ(r.capacity->gpu_hours, 8 * r.faults->expected_time_s / 3600);
}

TEST(Plan, OtherToolsNamesForTheLength) {
  EXPECT_EQ(load(R"({"global_batch_size": 64, "train_iters": 500})").steps, 500);  // Megatron
  EXPECT_EQ(load(R"({"global_batch_size": 64, "max_steps": 700})").steps, 700);    // Hugging Face
  EXPECT_EQ(load(R"({"global_batch_size": 64, "train_samples": 6401})").steps, 101);  // Megatron, rounded up
  const auto e = error_of(R"({"global_batch_size": 64, "steps": 5, "max_steps": 7})");
  EXPECT_NE(e.find("/training/max_steps: says what \"steps\" already says"), std::string::npos) << e;
}

TEST(Plan, GradientAccumulationStepsSetTheGlobalBatch) {
  // data 8 x micro-batch 4 x 3 = 96.
  EXPECT_EQ(load(R"({"global_batch_size": null, "gradient_accumulation_steps": 3})").training.global_batch, 96);
  EXPECT_EQ(load(R"({"global_batch_size": null, "train_batch_size": 96, "gradient_accumulation_steps": 3})")
                .training.global_batch,
            96);
  const auto e = error_of(R"({"global_batch_size": 64, "gradient_accumulation_steps": 3})");
  EXPECT_NE(e.find("/training/gradient_accumulation_steps: data (8) x micro_batch_size (4) x "
                   "gradient_accumulation_steps (3) = 96, but global_batch_size is 64"),
            std::string::npos)
      << e;
}

TEST(Suggest, OtherToolsKeysSayWhereDtsimKeepsThem) {
  auto e = error_of(R"({"global_batch_size": 64, "train_micro_batch_size_per_gpu": 4})");
  EXPECT_NE(e.find("/training/train_micro_batch_size_per_gpu: is parallelism.micro_batch_size in dtsim"), std::string::npos)
      << e;
  e = error_of(R"({"global_batch_size": 64, "num_train_epochs": 3})");
  EXPECT_NE(e.find("/training/num_train_epochs: dtsim has no dataset size: give tokens, steps or train_samples"),
            std::string::npos)
      << e;
  e = error_of(R"({"global_batch_size": 64, "gradient_checkpointing": true})");
  EXPECT_NE(e.find("is parallelism.recompute"), std::string::npos) << e;
}

TEST(Suggest, UnknownKeysNameTheNearestKnownOne) {
  auto e = error_of(R"({"global_batch_size": 64, "step": 5})");
  EXPECT_NE(e.find("/training/step: unknown key (did you mean \"steps\"?)"), std::string::npos) << e;
  e = error_of(R"({"global_batch_sise": 64})");
  EXPECT_NE(e.find("unknown key (did you mean \"global_batch_size\"?)"), std::string::npos) << e;
  // Keys with a unit suffix are known by every spelling of the unit.
  e = error_of(R"({"global_batch_size": 64})", R"("faults": {"gpu_mtbf_hours": 10, "node_mtbf_hour": 10, "checkpoint_save_s": 1, "restart_s": 1})");
  EXPECT_NE(e.find("/faults/node_mtbf_hour: unknown key (did you mean \"node_mtbf_hours\"?)"), std::string::npos) << e;
  // Nothing near: no guess.
  e = error_of(R"({"global_batch_size": 64, "zzzzzzzzzzzz": 1})");
  EXPECT_NE(e.find("/training/zzzzzzzzzzzz: unknown key"), std::string::npos) << e;
  EXPECT_EQ(e.find("did you mean"), std::string::npos) << e;
  EXPECT_EQ(nearest("pipline", {"pipeline", "tensor", "data"}), "pipeline");
  EXPECT_EQ(nearest("tnesor", {"pipeline", "tensor", "data"}), "tensor");  // a swap is one edit
}

TEST(Fit, GptThreeOnOneA100SaysHowLongAndTheFewestGpus) {
  const auto s = config::load_scenario(test::source_dir() + "/scenarios/planning/gpt3-175b-one-a100.json");
  // 300B tokens / (1536 x 2048 tokens per step) = 95,367.4 -> 95,368 steps.
  EXPECT_EQ(s.steps, 95368);
  const auto r = results::memory_only(s);
  EXPECT_FALSE(r.fits);
  ASSERT_TRUE(r.fewest_fit);
  const auto& f = *r.fewest_fit;
  // Bf16 with Adam keeps 16 bytes per parameter (2 weights, 2 gradients, 12 fp32 master, m, v);
  // 16 x 174.6e9 = 2.79e12 bytes over 80 GiB = 85.9e9 bytes is 32.5 GPUs even if nothing else
  // took memory, so no fewer than 33. With tensor 8 in a node and 96 blocks over 5 stages, the
  // fullest stage holds 20 blocks: 20 x 1.812e9 / 8 params x 16 bytes = 72.5e9 bytes (67.5 GiB),
  // plus full recomputation's inputs kept by stage 0 for its 5 in-flight micro-batches and the
  // rebuilt block: 40 GPUs fit, and every shape of 33 to 39 GPUs splits too unevenly to.
  EXPECT_EQ(f.gpus, 40);
  EXPECT_EQ(f.tensor * f.pipeline * f.data, 40);
  EXPECT_LE(f.peak_bytes, 80.0 * 1024 * 1024 * 1024);
  EXPECT_GT(f.peak_bytes, 72.5e9);
  EXPECT_EQ(f.recompute, strategies::Recompute::Full);
  const auto j = results::to_json(r, false);
  EXPECT_EQ(j["plan"]["fewest_gpus_that_fit"]["gpus"], 40);
}

TEST(Fit, ScenariosThatFitSearchNothing) {
  const auto r = results::memory_only(load(R"({"global_batch_size": 64})"));
  EXPECT_TRUE(r.fits);
  EXPECT_FALSE(r.fewest_fit);
  EXPECT_FALSE(results::to_json(r, false).contains("plan"));
}
