// Issue 17 items 1 and 2: ZeRO-3 and FSDP as DeepSpeed and PyTorch run them, each knob against a
// hand count, and DeepSpeed's pipeline engine reducing gradients after the flush.
#include <gtest/gtest.h>

#include <string>

#include "scenario_helpers.hpp"
#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "sim/network/collectives.hpp"
#include "sim/results/result.hpp"
#include "strategies/framework.hpp"
#include "strategies/memory.hpp"
#include "strategies/recompute.hpp"

using namespace dtsim;

namespace {

// test::kTinyGptZero3. Parameters per sub-module: embedding 4096*256 + 256*256 = 1,114,112; per
// block qkv 197,376, attention out 65,792, fc1 263,168, fc2 262,400 and two norms of 512; final
// norm 512.
std::string over(const std::string& parallelism) { return R"({"extends": "base.json", "parallelism": )" + parallelism + "}"; }
results::Result run(const std::string& parallelism) { return test::simulate_over(test::kTinyGptZero3, over(parallelism)); }
std::string error_of(const std::string& parallelism) { return test::input_error_over(test::kTinyGptZero3, over(parallelism)); }

// Bytes all ZeRO-3 all-gathers of the step carry, and how many collectives of each kind.
struct Counted {
  double gather_bytes = 0;
  int gathers = 0, reduce_scatters = 0;
};
Counted count(const results::Result& r) {
  Counted c;
  for (const auto& t : r.plan.graph.tasks) {
    if (!t.is_collective) continue;
    if (t.label().rfind("zero3 gather", 0) == 0) {
      ++c.gathers;
      c.gather_bytes += t.collective().bytes;
    }
    if (t.label().rfind("zero3 reduce-scatter", 0) == 0) ++c.reduce_scatters;
  }
  return c;
}

}  // namespace

// One all-gather per partitioned sub-module when the prefetch bucket holds one: the embedding
// and each block's qkv, fc1 and fc2 (norms and the 65,792-element attention output are below the
// 1e5 persistence threshold, never partitioned): 13 in forward, 13 again in backward with no
// reuse, per micro-batch; 2 micro-batches.
TEST(Frameworks, DeepSpeedGathersEachSubModuleWhenTheBucketHoldsOne) {
  const auto r = run(R"({"framework": "deepspeed", "zero3": {"prefetch_bucket_params": 1, "max_reuse_distance_params": 0}})");
  EXPECT_EQ(r.plan.zero3_gathers, 2u * 26u);
  EXPECT_EQ(count(r).gathers, 52);
  const double sub_modules = 1114112.0 + 4 * (197376.0 + 263168.0 + 262400.0);
  EXPECT_DOUBLE_EQ(count(r).gather_bytes, 2 * 2 * sub_modules * 2.0);  // micro-batches x passes x bf16
}

// The prefetch bucket coalesces the next sub-modules until it holds 6e5 elements: the embedding
// alone, then each block's three in one (197,376 + 263,168 < 6e5, + 262,400): 5 per pass.
TEST(Frameworks, PrefetchBucketCoalescesSubModules) {
  const auto r = run(R"({"framework": "deepspeed", "zero3": {"prefetch_bucket_params": 600000, "max_reuse_distance_params": 0}})");
  EXPECT_EQ(r.plan.zero3_gathers, 2u * 10u);
}

// DeepSpeed's defaults keep every parameter of a model this small between its uses (the whole
// model is within max_reuse_distance 1e9) and coalesce them all into the 5e7 bucket: one
// all-gather per micro-batch.
TEST(Frameworks, DeepSpeedDefaultsKeepASmallModelGathered) {
  const auto r = run(R"({"framework": "deepspeed"})");
  EXPECT_EQ(r.plan.zero3_gathers, 2u);
}

// Recompute: the recompute forward's hooks gather each block's sub-modules again. With no reuse
// each block's backward gathers 3 for the recompute and 3 for the backward: 13 + 4 x 6 + 1 = 38
// per micro-batch, 12 more than without recompute, i.e. 4 x (197,376 + 263,168 + 262,400)
// elements more. A reuse distance of 3e5 elements keeps fc2 alone (used again at once by its
// backward; fc1 has fc2 twice, 524,800 elements, in between): 4 fewer.
TEST(Frameworks, RecomputeRegathersExceptWithinTheReuseDistance) {
  const std::string base = R"("framework": "deepspeed", "zero3": {"prefetch_bucket_params": 1, "max_reuse_distance_params": )";
  const auto plain = run("{" + base + "0}}");
  const auto rc = run("{" + base + R"(0}, "recompute": "full"})");
  const auto reuse = run("{" + base + R"(300000}, "recompute": "full"})");
  EXPECT_EQ(rc.plan.zero3_gathers, 2u * 38u);
  EXPECT_DOUBLE_EQ(count(rc).gather_bytes - count(plain).gather_bytes, 2 * 4 * (197376.0 + 263168.0 + 262400.0) * 2.0);
  EXPECT_EQ(reuse.plan.zero3_gathers, 2u * 34u);
  EXPECT_DOUBLE_EQ(count(rc).gather_bytes - count(reuse).gather_bytes, 2 * 4 * 262400.0 * 2.0);
}

// FSDP: one all-gather per wrap unit; the root unit (embedding and head) stays gathered from
// forward to backward: 1 + 4 in forward, 4 in backward. One reduce-scatter per unit after its
// backward, the root's last: 5. Per micro-batch; recompute adds none (the pre-backward unshard
// covers it).
TEST(Frameworks, FsdpGathersPerUnitAndKeepsTheRoot) {
  for (const char* rc : {"none", "full"}) {
    const auto r = run(std::string(R"({"framework": "fsdp", "recompute": ")") + rc + "\"}");
    EXPECT_EQ(r.plan.zero3_gathers, 2u * 9u) << rc;
    EXPECT_EQ(r.plan.zero3_reduce_scatters, 2u * 5u) << rc;
  }
}

// DeepSpeed fills reduce-scatter buckets in backward order and reduces one when the next
// gradient would overflow it, every micro-batch. With 1e6 elements: head and block 3 (512 +
// 789,760), then each block alone as the next one's fc2 overflows it, then the embedding
// (1,114,112) alone: 5. In bf16 by default, fp32 when reduce_dtype says so.
TEST(Frameworks, DeepSpeedReduceScattersPerBucketPerMicroBatch) {
  const auto r = run(R"({"framework": "deepspeed", "zero3": {"reduce_bucket_params": 1000000}})");
  EXPECT_EQ(r.plan.zero3_reduce_scatters, 2u * 5u);
  const auto fp32 = run(R"({"framework": "deepspeed", "zero3": {"reduce_bucket_params": 1000000, "reduce_dtype": "fp32"}})");
  double b16 = 0, b32 = 0;
  for (const auto& t : r.plan.graph.tasks)
    if (t.is_collective && t.collective().op == taskgraph::CollectiveOp::ReduceScatter) b16 += t.collective().bytes;
  for (const auto& t : fp32.plan.graph.tasks)
    if (t.is_collective && t.collective().op == taskgraph::CollectiveOp::ReduceScatter) b32 += t.collective().bytes;
  EXPECT_DOUBLE_EQ(b32, 2.0 * b16);
  EXPECT_DOUBLE_EQ(b16, 2 * r.params * 2.0);  // every gradient, twice (2 micro-batches), 2 bytes
}

// With nothing prefetched (depth 0) and the host waiting for the reductions after each
// backward, every collective sits on the critical path: a fixed launch cost per collective adds
// exactly launch x (all-gathers + reduce-scatters) to the step.
TEST(Frameworks, LaunchCostAddsOncePerCollectiveOnTheCriticalPath) {
  const std::string knobs = R"({"framework": "fsdp", "zero3": {"forward_prefetch_depth": 0, "backward_prefetch": "none")";
  const auto free = run(knobs + R"(, "collective_launch_us": 0}})");
  const auto paid = run(knobs + R"(, "collective_launch_us": 1000}})");
  const double collectives = static_cast<double>(free.plan.zero3_gathers + free.plan.zero3_reduce_scatters);
  EXPECT_EQ(collectives, 28.0);
  EXPECT_NEAR(paid.step_time_s - free.step_time_s, collectives * 1e-3, 1e-9);
}

// Prefetching one gather ahead hides gathers behind compute that no prefetch leaves exposed.
TEST(Frameworks, PrefetchDepthHidesGathers) {
  const auto none = run(R"({"framework": "fsdp", "zero3": {"forward_prefetch_depth": 0, "backward_prefetch": "none"}})");
  const auto ahead = run(R"({"framework": "fsdp"})");
  EXPECT_GT(none.breakdown.exposed_communication, ahead.breakdown.exposed_communication);
  EXPECT_GT(none.step_time_s, ahead.step_time_s);
}

TEST(Frameworks, KnobsNeedAFrameworkAndZeroStage3) {
  EXPECT_NE(error_of(R"({"zero3": {"prefetch_bucket_params": 1}})").find("/parallelism/zero3"), std::string::npos);
  EXPECT_NE(error_of(R"({"zero_stage": 2, "framework": "deepspeed", "zero3": {}})").find("zero_stage 3"), std::string::npos);
  EXPECT_NE(error_of(R"({"framework": "jax"})").find("/parallelism/framework"), std::string::npos);
  EXPECT_NE(error_of(R"({"pipeline_grad_reduce": "after-flush"})").find("pipeline"), std::string::npos);
  EXPECT_EQ(error_of(R"({"framework": "deepspeed", "zero3": {"stage3_prefetch_bucket_size": 5e7}})"),
            "/parallelism/zero3/stage3_prefetch_bucket_size: is prefetch_bucket_params in dtsim");
  // Interleaved chunks on one GPU would need two gather streams: refused, not a stuck schedule.
  EXPECT_EQ(error_of(R"({"zero_stage": 3, "framework": "fsdp", "pipeline_schedule": "interleaved-1f1b", "virtual_stages": 2})"),
            "/parallelism/framework: fsdp's ZeRO-3 with virtual stages (interleaved-1f1b) is not modelled");
}

// Across nodes a collective runs at NCCL's efficiency for its size: at half efficiency it takes
// as long as twice the bytes at full.
TEST(Frameworks, InterNodeEfficiencyBySize) {
  auto c = test::flat_cluster(4);
  const std::vector<int> ranks{0, 1, 2, 3};
  const network::Platform plain(c);
  c.inter_efficiency_points = {{1e6, 0.5}, {1e9, 1.0}};
  const network::Platform curved(c);
  using taskgraph::CollectiveOp;
  const auto t = [&](const network::Platform& pf, double bytes) {
    return network::analytical_time(pf, network::lower(pf, CollectiveOp::AllGather, taskgraph::Algorithm::Ring, bytes, ranks));
  };
  EXPECT_DOUBLE_EQ(t(curved, 1e5), t(plain, 2e5));
  EXPECT_DOUBLE_EQ(t(curved, 2e9), t(plain, 2e9));
  EXPECT_GT(t(curved, 1e8), t(plain, 1e8));
}

// DeepSpeed's pipeline engine (TrainSchedule: ReduceTiedGrads, ReduceGrads, OptimizerStep): the
// data-parallel all-reduce starts only after the stage's last backward, reduces the BF16
// optimizer's fp32 gradients (4 bytes per parameter, Megatron 2), and on the first and last
// stage waits for the tied embedding's reduction.
TEST(Frameworks, DeepSpeedPipelineReducesAfterTheFlushInFp32) {
  const std::string pp = R"("data": 4, "pipeline": 2, "zero_stage": 0)";
  const auto ds = run("{" + pp + R"(, "framework": "deepspeed"})");
  const auto mg = run("{" + pp + "}");
  auto reduced = [](const results::Result& r) {
    double b = 0;
    for (const auto& t : r.plan.graph.tasks)
      if (t.is_collective && t.label().rfind("all_reduce bucket", 0) == 0) b += t.collective().bytes;
    return b;
  };
  EXPECT_DOUBLE_EQ(reduced(ds), 2.0 * reduced(mg));
  const auto& g = ds.plan.graph;
  int tied = -1;
  for (std::size_t i = 0; i < g.tasks.size(); ++i)
    if (g.tasks[i].label() == "embedding all_reduce") tied = static_cast<int>(i);
  ASSERT_GE(tied, 0);
  int buckets = 0;
  for (std::size_t i = 0; i < g.tasks.size(); ++i) {
    const auto& t = g.tasks[i];
    if (!t.is_collective || t.label().rfind("all_reduce bucket", 0) != 0) continue;
    ++buckets;
    // After every backward of its stage has ended: no compute of that GPU ends later.
    const int gpu = g.groups[static_cast<std::size_t>(t.collective().groups[0])][0];
    for (std::size_t k = 0; k < g.tasks.size(); ++k) {
      if (!g.tasks[k].is_collective && g.tasks[k].rank == gpu && g.tasks[k].category == taskgraph::Category::Compute) {
        EXPECT_LE(ds.timeline.end[k], ds.timeline.start[i] + 1e-12) << t.label();
      }
    }
    // The tied weights' reduction first.
    EXPECT_GE(ds.timeline.start[i], ds.timeline.end[static_cast<std::size_t>(tied)] - 1e-12);
  }
  EXPECT_EQ(buckets, 2);  // one 5e8-element buffer per stage
  EXPECT_GT(ds.step_time_s, mg.step_time_s);
}

// By default each ZeRO-3 collective of DeepSpeed and FSDP pays NCCL's per-call cost, 5.65 us
// (nccl-tests' 0-byte reduce_scatter on 2 nodes, NVIDIA/nccl-tests issue 128): with nothing
// prefetched all 28 collectives of the step are on the critical path, 28 x 5.65 us.
TEST(Frameworks, SmallCollectivesPayNcclsCallCostByDefault) {
  const std::string knobs = R"({"framework": "fsdp", "zero3": {"forward_prefetch_depth": 0, "backward_prefetch": "none")";
  const auto free = run(knobs + R"(, "collective_launch_us": 0}})");
  const auto dflt = run(knobs + "}}");
  EXPECT_NEAR(dflt.step_time_s - free.step_time_s, 28 * 5.65e-6, 1e-12);
  EXPECT_EQ(strategies::framework_defaults(strategies::Framework::MegatronLM).collective_launch_s, 0.0);
}

// DeepSpeed's stage3_max_live_parameters bounds what the coordinator prefetches: tiny-gpt's
// partitioned sub-modules (embedding 1,114,112; per block qkv 197,376, fc1 263,168, fc2
// 262,400), nothing kept between uses (reuse distance 0), no recompute.
TEST(Frameworks, MaxLiveParametersBoundGatheredMemory) {
  const auto r = run(R"({"framework": "deepspeed"})");
  const auto& sc = r.scenario_spec;
  const auto graph = sc.model.build(models::BuildOptions{sc.parallelism.micro_batch, strategies::activation_bytes(sc.training.precision),
                                                         sc.training.attention, 1, false});
  std::vector<const models::Layer*> layers;
  for (const auto& l : graph.layers) layers.push_back(&l);
  auto f = strategies::framework_defaults(strategies::Framework::DeepSpeed);
  f.max_reuse_distance_params = 0;
  auto peak = [&](double bucket, double live) {
    f.prefetch_bucket_params = bucket;
    f.max_live_params = live;
    return strategies::zero3_gathered_peak(layers, f, strategies::Checkpoints(strategies::ParallelismSpec{}, {layers}, 1));
  };
  // Live bound below the embedding: nothing is prefetched, the largest sub-module alone.
  EXPECT_DOUBLE_EQ(peak(1e9, 1), 1114112.0);
  // A bucket of one element: one sub-module ahead; worst, the embedding and the first qkv.
  EXPECT_DOUBLE_EQ(peak(1, 1e9), 1114112.0 + 197376.0);
  // A 1.5e6 bound and a large bucket: the worst moment is block 1's fc2 in backward (262,400
  // gathered; blocks counted from 0). The coordinator adds parameters while fewer than
  // 1,237,600 (1.5e6 - 262,400) are in flight: fc1 and qkv, block 0's fc2, fc1 and qkv
  // (1,183,488 so far), then the embedding, which overshoots as DeepSpeed's loop does: 2,297,600.
  // Never more than the bound plus one sub-module.
  EXPECT_DOUBLE_EQ(peak(1e9, 1.5e6), 262400.0 + 2 * (263168.0 + 197376.0) + 262400.0 + 1114112.0);
  EXPECT_LE(peak(1e9, 1.5e6), 1.5e6 + 1114112.0);
  // Without the bound the first use prefetches every other sub-module: the whole model.
  EXPECT_DOUBLE_EQ(peak(1e9, 1e15), 1114112.0 + 4 * (197376.0 + 263168.0 + 262400.0));
  // The knob under DeepSpeed's own name is pointed to dtsim's, and only DeepSpeed has it.
  EXPECT_EQ(error_of(R"({"framework": "deepspeed", "zero3": {"stage3_max_live_parameters": 1e9}})"),
            "/parallelism/zero3/stage3_max_live_parameters: is max_live_params in dtsim");
  EXPECT_NE(error_of(R"({"framework": "fsdp", "zero3": {"max_live_params": 1e9}})").find("max_live_params"), std::string::npos);
  // And the memory of a DeepSpeed run follows it: a smaller bound, fewer gathered bytes.
  const auto tight = run(R"({"framework": "deepspeed", "zero3": {"max_live_params": 1, "max_reuse_distance_params": 0}})");
  const auto loose = run(R"({"framework": "deepspeed", "zero3": {"max_reuse_distance_params": 0}})");
  EXPECT_LT(tight.memory.other, loose.memory.other);
}

// DeepSpeed's engine reduces the gradients after the backward without ZeRO or with ZeRO-1
// (runtime/engine.py allreduce_gradients at the accumulation boundary); Megatron-LM's buckets go
// as the backward fills them.
TEST(Frameworks, DeepSpeedReducesAfterTheBackwardWithoutZeroOrWithZeroOne) {
  auto last_backward_and_first_bucket = [](const results::Result& r) {
    double backward = 0, bucket = 1e300;
    const auto& tasks = r.plan.graph.tasks;
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      const std::string& label = tasks[i].label();
      if (!tasks[i].is_collective && label.rfind("bwd", 0) == 0) backward = std::max(backward, r.timeline.end[i]);
      if (tasks[i].is_collective && label.find("bucket") != std::string::npos) bucket = std::min(bucket, r.timeline.start[i]);
    }
    return std::make_pair(backward, bucket);
  };
  for (const char* stage : {"0", "1"}) {
    const std::string p = std::string(R"({"data": 8, "zero_stage": )") + stage;
    const auto [ds_backward, ds_bucket] = last_backward_and_first_bucket(run(p + R"(, "framework": "deepspeed"})"));
    EXPECT_GE(ds_bucket, ds_backward - 1e-12) << stage;
    const auto [mg_backward, mg_bucket] = last_backward_and_first_bucket(run(p + "}"));
    EXPECT_LT(mg_bucket, mg_backward) << stage;  // overlapped
  }
  const auto err = error_of(R"({"data": 8, "zero_stage": 1, "framework": "deepspeed", "overlap_grad_reduce": true})");
  EXPECT_NE(err.find("/parallelism/overlap_grad_reduce"), std::string::npos) << err;
  EXPECT_NE(err.find("after the backward"), std::string::npos) << err;
}
