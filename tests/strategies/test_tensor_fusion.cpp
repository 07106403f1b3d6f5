// Horovod's tensor fusion (issue 30; strategies/tensor_fusion.hpp, strategies/units/tensor_fusion.cpp):
// buffers cut by the cycle tick each gradient is ready at, then by the threshold, against cases
// worked by hand; the copies into and out of the fusion buffer at the memory-bound kernels' HBM
// rate; the negotiation per tick; the presets' values from Horovod's source; the keys' refusals.
#include <gtest/gtest.h>

#include "run_dtsim.hpp"
#include "scenario_helpers.hpp"
#include "sim/config/build_options.hpp"
#include "sim/config/scenario.hpp"
#include "sim/cost/roofline.hpp"
#include "sim/cost/stack.hpp"
#include "sim/sweep/candidates.hpp"
#include "strategies/plan.hpp"
#include "strategies/tensor_fusion.hpp"

using namespace dtsim;

namespace {

constexpr double kMiB = 1024.0 * 1024;

// Layers of one parameter tensor each, of `mib` MiB of fp16 gradients (2 bytes a parameter).
struct Model {
  std::vector<models::Layer> layers;
  std::vector<const models::Layer*> ptrs;
  explicit Model(const std::vector<double>& mib) {
    for (double m : mib) {
      models::Layer l;
      models::Op op;
      op.params = m * kMiB / 2;
      l.ops.push_back(op);
      layers.push_back(l);
    }
    for (const auto& l : layers) ptrs.push_back(&l);
  }
};

strategies::TensorFusion fusion(double threshold_mib, double cycle_ms, std::vector<double> ready_ms) {
  strategies::TensorFusion f;
  f.threshold_bytes = threshold_mib * kMiB;
  f.cycle_s = cycle_ms * 1e-3;
  for (double r : ready_ms) f.ready_s.push_back(r * 1e-3);
  return f;
}

// The base's GPT-2 on 8 A100s under `stack` (JSON of the stack object).
config::Scenario horovod_gpt2(const std::string& stack) {
  test::TempDir dir;
  dir.file("base.json", test::kValidScenario);
  return config::load_scenario(dir.file("s.json", R"({"extends": "base.json", "stack": )" + stack + "}"));
}

}  // namespace

// Six gradients, backward from layer 5 down to 0, ready at 1, 3, 5, 7, 9.5 and 12 ms; a 5 ms
// cycle and a 64 MiB threshold. Ticks at 5, 10, 15 ms: layers 5, 4, 3 (ready at or before 5 ms,
// layer 3 exactly on it) go at 5 ms, 10 + 20 MiB fused and layer 3's 40 MiB cut off by the
// threshold (70 > 64); layers 2 and 1 at 10 ms, 8 + 16 MiB; layer 0 at 15 ms, 100 MiB, alone
// above the threshold.
TEST(TensorFusion, SixGradientsCutByTickThenThreshold) {
  const Model m({100, 16, 8, 40, 20, 10});
  const auto b = strategies::fusion_buffers(m.ptrs, 2.0, fusion(64, 5, {12, 9.5, 7, 5, 3, 1}));
  ASSERT_EQ(b.size(), 4u);
  const std::vector<double> mib{30, 40, 24, 100};
  const std::vector<int> tick{1, 1, 2, 3}, tensors{2, 1, 2, 1}, last{4, 3, 1, 0};
  const std::vector<bool> opens{true, false, true, true};
  for (std::size_t i = 0; i < b.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_DOUBLE_EQ(b[i].bytes, mib[i] * kMiB);
    EXPECT_EQ(b[i].tick, tick[i]);
    EXPECT_EQ(b[i].tensors, tensors[i]);
    EXPECT_EQ(b[i].ready_after_layer, last[i]);
    EXPECT_EQ(b[i].opens_tick, opens[i]);
  }
}

// DDP's 25 MiB buckets cut the same gradients by size alone, whenever they are ready.
TEST(TensorFusion, TheSameGradientsInDdpBucketsIgnoreTheTicks) {
  const Model m({100, 16, 8, 40, 20, 10});
  const auto b = strategies::make_buckets(m.ptrs, 2.0, 25 * kMiB, 25 * kMiB);
  ASSERT_EQ(b.size(), 5u);  // 10 | 20 | 40 | 8 + 16 | 100
  EXPECT_DOUBLE_EQ(b[3].bytes, 24 * kMiB);
  EXPECT_EQ(b[0].tick, -1);
}

// Everything ready by one tick (or no ready times known): the threshold alone cuts.
TEST(TensorFusion, OneTickCutsAtTheThresholdOnly) {
  const Model m({30, 30, 30, 30});
  for (const auto& f : {fusion(64, 5, {4, 3, 2, 1}), fusion(64, 5, {})}) {
    const auto b = strategies::fusion_buffers(m.ptrs, 2.0, f);
    ASSERT_EQ(b.size(), 2u);
    EXPECT_DOUBLE_EQ(b[0].bytes, 60 * kMiB);
    EXPECT_TRUE(b[0].opens_tick);
    EXPECT_FALSE(b[1].opens_tick);
  }
}

TEST(TensorFusion, PresetsAreHorovodsDefaults) {
  const auto now = cost::find_stack("horovod")->fusion;  // v0.21.0 and later, v0.28.1 operations.cc 519, 527
  EXPECT_DOUBLE_EQ(now.threshold_bytes, 128 * kMiB);
  EXPECT_DOUBLE_EQ(now.cycle_s, 1e-3);
  EXPECT_TRUE(now.response_cache);
  const auto old = cost::find_stack("horovod-0.16")->fusion;  // v0.16.0 operations.cc 1838, 1846
  EXPECT_DOUBLE_EQ(old.threshold_bytes, 64 * kMiB);
  EXPECT_DOUBLE_EQ(old.cycle_s, 5e-3);
  EXPECT_FALSE(old.response_cache);
  EXPECT_FALSE(cost::find_stack("default")->fusion.on());
}

// Ready times are the final backward's timeline, layer by layer from the last; a copy moves each
// byte in and out of HBM at the device's memory-bound rate.
TEST(TensorFusion, ReadyTimesAndCopyRateFromTheCostModel) {
  const auto s = horovod_gpt2(R"({"preset": "horovod-0.16", "fusion_threshold_MiB": 32, "cycle_time_ms": 2})");
  const auto& f = s.parallelism.fusion;
  EXPECT_DOUBLE_EQ(f.threshold_bytes, 32 * kMiB);
  EXPECT_DOUBLE_EQ(f.cycle_s, 2e-3);
  ASSERT_GT(f.ready_s.size(), 2u);
  for (std::size_t i = 0; i + 1 < f.ready_s.size(); ++i) EXPECT_GT(f.ready_s[i], f.ready_s[i + 1]);
  const auto& d = s.device;
  const double gib = 1024 * kMiB;
  const double rate = 2.0 / (d.hbm_bandwidth * d.memory.at(2 * gib));
  EXPECT_NEAR(f.copy_s_per_byte, rate, cost::launch_overhead(d, "fp16") / gib + 1e-15);
}

// In the plan: each tick's first buffer waits for the coordinator's gather and broadcast, a
// buffer of several tensors costs its two copies before any byte moves, a lone tensor none.
TEST(TensorFusion, PlanNegotiatesEachTickAndPricesTheCopies) {
  const auto s = horovod_gpt2(R"({"preset": "horovod-0.16"})");
  const auto g = s.model.build(config::build_options(s));
  const auto plan = strategies::plan_training(g, s.parallelism, s.training, s.host);
  const auto& f = s.parallelism.fusion;
  int gathers = 0, broadcasts = 0, buckets = 0;
  for (const auto& t : plan.graph.tasks) {
    if (!t.is_collective) continue;
    const auto& c = t.collective();
    gathers += c.op == taskgraph::CollectiveOp::Reduce ? 1 : 0;
    broadcasts += c.op == taskgraph::CollectiveOp::Broadcast ? 1 : 0;
    if (c.op != taskgraph::CollectiveOp::AllReduce) continue;
    ++buckets;
    if (c.launch_s > 0) {
      EXPECT_NEAR(c.launch_s, 2 * c.bytes * f.copy_s_per_byte, 1e-15);
    }
  }
  const auto fused = strategies::fusion_buffers(strategies::layout_of(g, s.parallelism, s.training).stage_layers(0), 2.0, f);
  int ticks = 0, copied = 0;
  for (const auto& b : fused) ticks += b.opens_tick ? 1 : 0, copied += b.tensors > 1 ? 1 : 0;
  EXPECT_EQ(buckets, static_cast<int>(fused.size()));
  EXPECT_EQ(gathers, ticks);
  EXPECT_EQ(broadcasts, ticks);
  EXPECT_GT(copied, 0);
  EXPECT_EQ(plan.unit_tasks.at("tensor-fusion"), static_cast<std::size_t>(2 * ticks));
}

// Horovod 0.17 and later: one all-reduce of the response cache's bit vector per tick (a bit per
// tensor and 3 status bits, in 8-byte words; recursive doubling), and no coordinator.
TEST(TensorFusion, ResponseCacheNegotiatesByOneBitVectorAllReducePerTick) {
  const auto s = horovod_gpt2(R"({"preset": "horovod"})");
  const auto g = s.model.build(config::build_options(s));
  const auto plan = strategies::plan_training(g, s.parallelism, s.training, s.host);
  const auto fused = strategies::fusion_buffers(strategies::layout_of(g, s.parallelism, s.training).stage_layers(0), 2.0,
                                                s.parallelism.fusion);
  int ticks = 0, tensors = 0;
  for (const auto& b : fused) ticks += b.opens_tick ? 1 : 0, tensors += b.tensors;
  int bitvectors = 0;
  for (const auto& t : plan.graph.tasks) {
    if (!t.is_collective || t.collective().algorithm != taskgraph::Algorithm::HalvingDoubling) continue;
    ++bitvectors;
    EXPECT_EQ(t.collective().op, taskgraph::CollectiveOp::AllReduce);
    EXPECT_DOUBLE_EQ(t.collective().bytes, 8.0 * ((tensors + 3 + 63) / 64));
  }
  EXPECT_GT(ticks, 1);
  EXPECT_EQ(bitvectors, ticks);
  EXPECT_EQ(plan.unit_tasks.at("tensor-fusion"), static_cast<std::size_t>(ticks));
}

// Fusion slows GPT-2's step a little (copies, negotiation, waiting for ticks); the breakdown
// still sums to the step.
TEST(TensorFusion, StepWithFusionSumsAndCostsMore) {
  const auto base = test::simulate_over_base(R"({"extends": "base.json", "simulation": {"backend": "analytical"}})");
  const auto fused = test::simulate_over_base(
      R"({"extends": "base.json", "simulation": {"backend": "analytical"}, "stack": {"preset": "horovod-0.16"}})");
  test::expect_parts_sum_to_step(fused);
  EXPECT_GT(fused.step_time_s, base.step_time_s);
}

// A sweep from a Horovod scenario tries only what Horovod runs: data parallelism, no ZeRO.
TEST(TensorFusion, SweepCandidatesStayDataParallel) {
  auto s = horovod_gpt2(R"({"preset": "horovod"})");
  const auto all = sweep::enumerate(s, {s.training.precision});
  ASSERT_FALSE(all.empty());
  for (const auto& c : all) {
    EXPECT_EQ(c.p.tensor * c.p.pipeline * c.p.context * c.p.expert, 1) << sweep::describe(c);
    EXPECT_EQ(c.p.zero_stage, 0) << sweep::describe(c);
  }
}

TEST(TensorFusionKey, RefusesFusionKeysWithoutAHorovodStack) {
  auto e = test::input_error_over_base(R"({"extends": "base.json", "stack": {"fusion_threshold_MiB": 32}})");
  EXPECT_NE(e.find("/stack/fusion_threshold_MiB"), std::string::npos) << e;
  EXPECT_NE(e.find("horovod"), std::string::npos) << e;
  e = test::input_error_over_base(R"({"extends": "base.json", "stack": {"preset": "horovod", "cycle_tme_ms": 2}})");
  EXPECT_NE(e.find("/stack/cycle_tme_ms"), std::string::npos) << e;
  EXPECT_NE(e.find("cycle_time"), std::string::npos) << e;
  e = test::input_error_over_base(R"({"extends": "base.json", "stack": {"preset": "horovod", "cycle_time_ms": 0}})");
  EXPECT_NE(e.find("/stack/cycle_time_ms"), std::string::npos) << e;
  e = test::input_error_over_base(
      R"({"extends": "base.json", "parallelism": {"data": 4, "pipeline": 2}, "stack": {"preset": "horovod"}})");
  EXPECT_NE(e.find("/stack/preset"), std::string::npos) << e;
  EXPECT_NE(e.find("pipeline"), std::string::npos) << e;
}

// A DDP bucket size written beside a Horovod stack would change nothing: the user is told where
// the buffer size lives instead (the base scenario's default buckets are not written, so allowed).
TEST(TensorFusionKey, RefusesDdpBucketSizesUnderHorovod) {
  auto e = test::input_error_over_base(
      R"({"extends": "base.json", "parallelism": {"bucket_size_MiB": 64}, "stack": {"preset": "horovod"}})");
  EXPECT_NE(e.find("/parallelism/bucket_size_MiB"), std::string::npos) << e;
  EXPECT_NE(e.find("stack.fusion_threshold_MiB"), std::string::npos) << e;
  e = test::input_error_over_base(
      R"({"extends": "base.json", "parallelism": {"first_bucket_size_KiB": 512}, "stack": {"preset": "horovod-0.16"}})");
  EXPECT_NE(e.find("/parallelism/first_bucket_size_KiB"), std::string::npos) << e;
  EXPECT_NO_THROW(test::simulate_over_base(R"({"extends": "base.json", "parallelism": {"bucket_size_MiB": 64}})"));
}

TEST(TensorFusionKey, CliExitsTwoNamingTheKey) {
  test::TempDir dir;
  dir.file("base.json", test::kValidScenario);
  const auto path = dir.file("s.json", R"({"extends": "base.json", "stack": {"preset": "horovd"}})");
  const auto r = test::run_dtsim({"run", path, "-o", dir.path("out")}, dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("/stack/preset"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("horovod"), std::string::npos) << r.err;
}
