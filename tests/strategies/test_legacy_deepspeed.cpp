// Issue 30: DeepSpeed by version. 0.3.13-0.5.10 gathered and reduce-scattered ZeRO-3 parameters
// tensor by tensor, each gather after torch.cuda.synchronize(); the `deepspeed-0.5` stack preset
// (or `stack.zero3_gathers: "per-parameter"`) runs that, `deepspeed` today's coalesced gathers.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "scenario_helpers.hpp"
#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "sim/cost/stack.hpp"
#include "sim/results/result.hpp"

using namespace dtsim;

namespace {

// test::kTinyGptZero3 under DeepSpeed. Its tensors: the embedding's table 4096 x 256 and
// positions 256 x 256; per block norm1 (2 x 256), qkv (256 x 768, 768), attention out (256 x 256,
// 256), norm2, fc1 (256 x 1024, 1024), fc2 (1024 x 256, 256): 12 tensors; the final norm's 2; the
// head shares the table.
const std::string kBase = [] {
  auto j = nlohmann::json::parse(test::kTinyGptZero3);
  j["parallelism"]["framework"] = "deepspeed";
  return j.dump();
}();

std::string scenario(const std::string& zero3, const std::string& stack) {
  return R"({"extends": "base.json", "parallelism": {"zero3": )" + zero3 + R"(}, "stack": )" + stack + "}";
}
results::Result run(const std::string& zero3, const std::string& stack) { return test::simulate_over(kBase, scenario(zero3, stack)); }
std::string error_of(const std::string& json) { return test::input_error_over(kBase, json); }

bool starts(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// Seconds collective task c runs beside compute tasks of the GPU that runs the first compute task.
struct Overlaps {
  int gathers = 0, overlapping = 0;
};
Overlaps gather_overlaps(const results::Result& r) {
  const auto& tasks = r.plan.graph.tasks;
  const auto& tl = r.timeline;
  int rank = -1;
  for (const auto& t : tasks)
    if (!t.is_collective && t.rank >= 0) {
      rank = t.rank;
      break;
    }
  Overlaps o;
  for (std::size_t c = 0; c < tasks.size(); ++c) {
    if (!tasks[c].is_collective || !starts(tasks[c].label(), "zero3 gather")) continue;
    ++o.gathers;
    double beside = 0;
    for (std::size_t k = 0; k < tasks.size(); ++k) {
      if (tasks[k].is_collective || tasks[k].rank != rank) continue;
      beside += std::max(0.0, std::min(tl.end[c], tl.end[k]) - std::max(tl.start[c], tl.start[k]));
    }
    if (beside > 1e-12) ++o.overlapping;
  }
  return o;
}

const char* kEveryTensor = R"({"persistence_threshold_params": 0, "prefetch_bucket_params": 1, "max_reuse_distance_params": 0})";

}  // namespace

// With no persistence threshold every tensor is gathered alone: per micro-batch the embedding's 2,
// 12 per block (as many as the block has tensors) and the final norm's 2 in forward, and again in
// backward (no reuse): 2 x 52 per micro-batch, 2 micro-batches. Each tensor's gradient is
// reduce-scattered alone: 52 per micro-batch. Today's DeepSpeed gathers per sub-module: 8 per
// block, the embedding and the final norm, 34 per pass.
TEST(LegacyDeepSpeed, GathersOneCollectivePerParameterTensor) {
  const auto legacy = run(kEveryTensor, R"({"preset": "deepspeed-0.5"})");
  EXPECT_EQ(legacy.plan.zero3_gathers, 2u * 2u * (2u + 4u * 12u + 2u));
  EXPECT_EQ(legacy.plan.zero3_reduce_scatters, 2u * 52u);
  const auto today = run(kEveryTensor, R"({"preset": "deepspeed"})");
  EXPECT_EQ(today.plan.zero3_gathers, 2u * 2u * (1u + 4u * 6u + 1u));
}

// Persistence is per tensor: at DeepSpeed's 1e5 elements only the table and the qkv, fc1 and fc2
// weights are partitioned (the attention output's 65,536-element weight, the positions, every
// bias and norm stay whole): 13 gathers per pass. Every gradient is still reduce-scattered.
TEST(LegacyDeepSpeed, PersistenceIsJudgedTensorByTensor) {
  const auto r = run(R"({"prefetch_bucket_params": 1, "max_reuse_distance_params": 0})", R"({"preset": "deepspeed-0.5"})");
  EXPECT_EQ(r.plan.zero3_gathers, 2u * 2u * 13u);
  EXPECT_EQ(r.plan.zero3_reduce_scatters, 2u * 52u);
}

// torch.cuda.synchronize() before each gather: of a burst (here one sub-module's two tensors) only
// the last runs beside compute; the first of each waits for the GPU to drain and the compute waits
// for it. So at most half of the gathers overlap compute, and the step's exposed communication
// exceeds today's coalesced, prefetched gathers'.
TEST(LegacyDeepSpeed, SynchronisedGathersLeaveOnlyEachBurstsLastBesideCompute) {
  const auto legacy = run(kEveryTensor, R"({"preset": "deepspeed-0.5"})");
  const auto o = gather_overlaps(legacy);
  EXPECT_EQ(o.gathers, 2 * 2 * 52);
  EXPECT_LE(o.overlapping, o.gathers / 2);
  EXPECT_GT(o.overlapping, 0);  // each burst's last
  const auto today = run(kEveryTensor, R"({"preset": "deepspeed"})");
  EXPECT_GT(legacy.breakdown.exposed_communication, today.breakdown.exposed_communication);
  EXPECT_GT(legacy.step_time_s, today.step_time_s);
}

// The per-tensor sum: with every gather in one burst but its last, and compute of nothing else to
// hide behind, the step's exposed communication is at least the sum of the gathers that cannot
// overlap.
TEST(LegacyDeepSpeed, ExposedTimeIsAtLeastTheSumOfTheSynchronisedGathers) {
  const auto r = run(kEveryTensor, R"({"zero3_gathers": "per-parameter", "preset": "deepspeed"})");
  const auto& tasks = r.plan.graph.tasks;
  double synchronised = 0;
  int rank = -1;
  for (const auto& t : tasks)
    if (!t.is_collective && t.rank >= 0) {
      rank = t.rank;
      break;
    }
  for (std::size_t c = 0; c < tasks.size(); ++c) {
    if (!tasks[c].is_collective || !starts(tasks[c].label(), "zero3 gather")) continue;
    double beside = 0;
    for (std::size_t k = 0; k < tasks.size(); ++k)
      if (!tasks[k].is_collective && tasks[k].rank == rank)
        beside += std::max(0.0, std::min(r.timeline.end[c], r.timeline.end[k]) - std::max(r.timeline.start[c], r.timeline.start[k]));
    if (beside <= 1e-12) synchronised += r.timeline.end[c] - r.timeline.start[c];
  }
  EXPECT_GT(synchronised, 0.0);
  EXPECT_GE(r.breakdown.exposed_communication + 1e-12, synchronised);
}

// Bad input names the key and says what to do.
TEST(LegacyDeepSpeed, RefusedOutsideDeepSpeed) {
  EXPECT_EQ(error_of(R"({"extends": "base.json", "parallelism": {"framework": "fsdp"}, "stack": {"preset": "deepspeed-0.5"}})"),
            "/stack/preset: \"deepspeed-0.5\" is DeepSpeed's stack: set parallelism.framework to \"deepspeed\"");
  EXPECT_NE(error_of(R"({"extends": "base.json", "parallelism": {"zero3": {"gather": "unit"}}, "stack": {"preset": "deepspeed-0.5"}})")
                .find("per-parameter gathers replace parallelism.zero3.gather"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"extends": "base.json", "stack": {"zero3_gathers": "per-tensor"}})").find("/stack/zero3_gathers"),
            std::string::npos);
}

// Both presets keep the buffers DeepSpeed's optimizers allocate: with bf16 and no ZeRO,
// BF16_Optimizer's fp32 gradient buffer of the whole model (4 bytes per parameter) and its fp32
// master weights and Adam state sharded over the 8 ranks (12 / 8); with ZeRO-1 the gradients stay
// bf16 (docs/memory.md). Without a stack, the ZeRO paper's 2 + 2 + 12.
TEST(LegacyDeepSpeed, PresetsKeepTheBuffersDeepSpeedsOptimizersAllocate) {
  test::TempDir dir;
  dir.file("base.json", kBase);
  auto load = [&](const std::string& zero, const std::string& stack) {
    return results::simulate(config::load_scenario(dir.file(
        "s.json", R"({"extends": "base.json", "parallelism": {"zero_stage": )" + zero + "}" + stack + "}")));
  };
  for (const char* preset : {"deepspeed", "deepspeed-0.5"}) {
    const std::string stack = std::string(R"(, "stack": {"preset": ")") + preset + R"("})";
    const auto bf16_optimizer = load("0", stack);
    const double n = bf16_optimizer.params;
    EXPECT_NEAR(bf16_optimizer.memory.gradients, 4 * n, 1e-6 * n) << preset;
    EXPECT_NEAR(bf16_optimizer.memory.optimizer, 12 * n / 8, 1e-6 * n) << preset;
    EXPECT_NEAR(load("1", stack).memory.gradients, 2 * n, 1e-6 * n) << preset;
  }
  const auto paper = load("0", "");
  EXPECT_NEAR(paper.memory.gradients, 2 * paper.params, 1e-6 * paper.params);
}

// llm-foundry's stack: FlashAttention-2 (MPT's attn_impl "flash"), eager element-wise kernels (no
// compile_config), expandable segments (its expandable_segments default), FSDP's own buffers.
// Composer's FSDP1 defaults are parallelism.zero3 knobs: backward_prefetch BACKWARD_POST (no
// gather ahead in backward) and mixed_precision DEFAULT's fp32 reduce-scatters, twice the bytes of
// PURE's.
TEST(LlmFoundry, PresetWithComposersFsdpDefaults) {
  const auto st = cost::find_stack("llm-foundry");
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->attention, cost::AttentionImpl::Flash2);
  EXPECT_EQ(st->elementwise, cost::Elementwise::Eager);
  EXPECT_EQ(st->memory.allocator, strategies::Allocator::PytorchExpandable);
  EXPECT_EQ(st->memory.buffers, strategies::StateBuffers::Framework);
  test::TempDir dir;
  dir.file("base.json", kBase);
  auto reduce_bytes = [&](const std::string& zero3) {
    const auto r = results::simulate(config::load_scenario(dir.file(
        "s.json", R"({"extends": "base.json", "parallelism": {"framework": "fsdp", "zero3": )" + zero3 +
                      R"(}, "stack": {"preset": "llm-foundry"}})")));
    double bytes = 0;
    for (const auto& t : r.plan.graph.tasks)
      if (t.is_collective && starts(t.label(), "zero3 reduce-scatter")) bytes += t.collective().bytes;
    return bytes;
  };
  const double composer = reduce_bytes(R"({"backward_prefetch": "backward_post", "reduce_dtype": "fp32"})");
  const double pure = reduce_bytes(R"({"backward_prefetch": "backward_post"})");
  EXPECT_DOUBLE_EQ(composer, 2 * pure);
}
