// Issue 30: DeepSpeed's BF16_Optimizer (strategies/units/bf16_optimizer.cpp), what a DeepSpeed
// engine runs with bf16 and no ZeRO: each micro-batch's gradients cast up and added into an fp32
// buffer on the compute stream, that buffer all-reduced whole in fp32, the update on a 1/d shard
// and the bf16 weights all-gathered after it.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "models/model_graph.hpp"
#include "scenario_helpers.hpp"
#include "sim/results/result.hpp"
#include "strategies/spec.hpp"

using namespace dtsim;

namespace {

// tiny-gpt on 8 GPUs of data parallelism, 2 micro-batches each.
std::string base(const std::string& precision, int zero_stage) {
  auto j = nlohmann::json::parse(test::kTinyGptZero3);
  j["parallelism"]["framework"] = "deepspeed";
  j["parallelism"]["zero_stage"] = zero_stage;
  j["training"]["precision"] = precision;
  return j.dump();
}
results::Result run(const std::string& precision, int zero_stage = 0) {
  return test::simulate_over(base(precision, zero_stage), R"({"extends": "base.json"})");
}

bool starts(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

std::vector<std::size_t> labelled(const results::Result& r, const char* prefix) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < r.plan.graph.tasks.size(); ++i)
    if (starts(r.plan.graph.tasks[i].label(), prefix)) out.push_back(i);
  return out;
}

double work_bytes(const results::Result& r, std::size_t task) {
  double b = 0;
  for (const auto& k : r.plan.graph.works[static_cast<std::size_t>(r.plan.graph.tasks[task].work)].kernels) b += k.bytes;
  return b;
}

}  // namespace

TEST(Bf16Optimizer, AccumulatesEachMicroBatchIntoFp32OnTheComputeStream) {
  const auto r = run("bf16");
  const auto adds = labelled(r, "bf16 optimizer accumulate");
  ASSERT_EQ(adds.size(), 2u);  // one per micro-batch's backward
  for (auto t : adds) {
    // The cast reads 2 bytes and writes 4, the add reads 8 and writes 4, the zeroing writes 2.
    EXPECT_NEAR(work_bytes(r, t), 20 * r.params, 1e-9 * r.params);
    EXPECT_FALSE(r.plan.graph.tasks[t].is_collective);
    EXPECT_GE(r.timeline.start[t], 0.0);
  }
  // fp16 (FP16_Optimizer) and ZeRO (its own optimizer) run none of it.
  EXPECT_TRUE(labelled(run("fp16"), "bf16 optimizer").empty());
  EXPECT_TRUE(labelled(run("bf16", 1), "bf16 optimizer").empty());
}

TEST(Bf16Optimizer, AllReducesTheWholeFp32BufferAfterTheLastAccumulation) {
  const auto r = run("bf16");
  const auto adds = labelled(r, "bf16 optimizer accumulate");
  double last_add = 0;
  for (auto t : adds) last_add = std::max(last_add, r.timeline.end[t]);
  double bytes = 0;
  const auto buckets = labelled(r, "all_reduce bucket");
  ASSERT_FALSE(buckets.empty());
  for (auto b : buckets) {
    bytes += r.plan.graph.tasks[b].collective().bytes;
    EXPECT_GE(r.timeline.start[b], last_add);
  }
  EXPECT_NEAR(bytes, 4 * r.params, 1e-9 * r.params);  // fp32_groups_gradients_flat, whole
  // Without it (ZeRO-1's optimizer) the gradients travel as bf16, reduce-scattered.
  const auto zero1 = run("bf16", 1);
  double zero1_bytes = 0;
  for (auto b : labelled(zero1, "reduce_scatter bucket")) zero1_bytes += zero1.plan.graph.tasks[b].collective().bytes;
  EXPECT_NEAR(zero1_bytes, 2 * zero1.params, 1e-9 * zero1.params);
}

TEST(Bf16Optimizer, UpdatesItsShardThenGathersTheBf16WeightsAndZeroesTheBuffer) {
  const auto r = run("bf16");
  const auto step = labelled(r, "optimizer");
  ASSERT_EQ(step.size(), 1u);
  const double shard = r.params / 8;
  EXPECT_NEAR(work_bytes(r, step[0]),
              models::optimizer_kernel(models::OptimizerKind::Adam, shard, strategies::update_path(strategies::Precision::Bf16)).bytes,
              1e-9 * r.params);
  const auto gather = labelled(r, "bf16 optimizer gather params");
  ASSERT_EQ(gather.size(), 1u);
  EXPECT_NEAR(r.plan.graph.tasks[gather[0]].collective().bytes, 2 * r.params, 1e-9 * r.params);
  EXPECT_GE(r.timeline.start[gather[0]], r.timeline.end[step[0]]);
  const auto zero = labelled(r, "bf16 optimizer zero gradients");
  ASSERT_EQ(zero.size(), 1u);
  EXPECT_NEAR(work_bytes(r, zero[0]), 4 * r.params, 1e-9 * r.params);
  // The whole step costs more than ZeRO-1's with the same shard: the per-micro-batch casts and
  // the fp32 all-reduce.
  EXPECT_GT(r.step_time_s, run("bf16", 1).step_time_s);
}

// DeepSpeed's pipeline engine reduces after the flush either way: BF16_Optimizer's fp32 buffer
// without ZeRO, the bf16 gradients themselves under ZeRO-1 (grad_accum_dtype defaults to the
// model's dtype with ZeRO, runtime/engine.py get_data_types).
TEST(Bf16Optimizer, PipelinesReduceFp32WithoutZeroAndBf16UnderZeroOne) {
  auto reduced = [](int zero_stage) {
    auto j = nlohmann::json::parse(base("bf16", zero_stage));
    j["parallelism"]["data"] = 4;
    j["parallelism"]["pipeline"] = 2;
    const auto r = test::simulate_over(j.dump(), R"({"extends": "base.json"})");
    double bytes = 0;
    for (const auto& t : r.plan.graph.tasks)
      if (t.is_collective && t.label().find(" bucket ") != std::string::npos) bytes += t.collective().bytes;
    return bytes / r.params;  // both stages' buckets: every parameter once
  };
  EXPECT_NEAR(reduced(0), 4.0, 0.01);
  EXPECT_NEAR(reduced(1), 2.0, 0.01);
}
