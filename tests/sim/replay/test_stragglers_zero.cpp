// Stragglers under ZeRO-2 and ZeRO-3 (Megatron's, DeepSpeed's and FSDP's) and expert parallelism:
// every replica emitted joins the one collective over its data- or expert-parallel group, so a
// slow GPU holds up the whole group.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "run_dtsim.hpp"
#include "scenario_helpers.hpp"
#include "sim/replay/replay.hpp"

using namespace dtsim;

namespace {

const char* kZeroModes[] = {R"("zero_stage": 2)", R"("zero_stage": 3)", R"("zero_stage": 3, "framework": "deepspeed")",
                            R"("zero_stage": 3, "framework": "fsdp")"};

// DeepSpeed and FSDP issue each prefetched all-gather when the compute reaches a layer before its
// use, so behind a slow GPU the gather starts late and the others also wait for its transfer,
// which hid behind their compute: part of what the step grew by is then exposed communication.
bool gathers_wait_for_compute(const std::string& zero) { return zero.find("framework") != std::string::npos; }

// GPT-2 small on 16 GPUs (two nodes), two micro-batches of 4 per step (so ZeRO-2 reduces the
// first one's gradients inside the passes); `stragglers` is the stragglers block or empty.
std::string scenario(const std::string& zero, const std::string& backend, const std::string& stragglers) {
  return R"({"extends": "base.json", "cluster": {"nodes": 2},
      "parallelism": {"data": 16, "micro_batch_size": 4, )" + zero + R"(}, "training": {"global_batch_size": 128},
      "simulation": {"backend": ")" + backend + "\"}" + (stragglers.empty() ? "" : ", \"stragglers\": " + stragglers) + "}";
}

results::Result analytical(const std::string& zero, const std::string& stragglers) {
  return test::simulate_over_base(scenario(zero, "analytical", stragglers));
}

// One GPU's own breakdown of the (single) replayed step.
replay::Breakdown gpu_breakdown(const results::Result& r, int gpu) {
  return replay::step_breakdown(r.replayed(), r.timeline, r.work_seconds, r.work_comm_seconds, {.rank = gpu});
}

std::size_t zero_collectives(const results::Result& r) {
  std::size_t n = 0;
  for (const auto& t : r.plan.graph.tasks) n += t.is_collective && t.label().rfind("zero", 0) == 0 ? 1 : 0;
  return n;
}

const char* kOneSlowGpu = R"({"slow_gpus": [{"gpu": 5, "slowdown": 1.5}]})";
constexpr double kSlowdown = 1.5;

}  // namespace

// Every replica emitted joins the same ZeRO-2/3 collectives the representative replica runs
// alone: as many collectives, and with no GPU slower than another the same step.
TEST(StragglersZero, EveryReplicaJoiningEachCollectiveGivesTheRepresentativeStep) {
  for (const char* zero : kZeroModes) {
    SCOPED_TRACE(zero);
    auto one = analytical(zero, "");
    auto every = analytical(zero, R"({"seed": 1})");
    ASSERT_EQ(one.plan.replicas, 1);
    ASSERT_EQ(every.plan.replicas, 16);
    EXPECT_GT(zero_collectives(one), 0u);
    EXPECT_EQ(zero_collectives(every), zero_collectives(one));
    EXPECT_NEAR(every.step_time_s, one.step_time_s, 1e-9 * one.step_time_s);
    EXPECT_NEAR(every.breakdown.compute, one.breakdown.compute, 1e-9 * one.step_time_s);
    EXPECT_NEAR(every.breakdown.straggler_wait, 0.0, 1e-9 * one.step_time_s);
    test::expect_parts_sum_to_step(every);
  }
}

// One GPU at 1/k speed: each ZeRO collective of its group waits for it, so its compute is k times
// the others' and every other GPU waits out the difference as straggler wait.
TEST(StragglersZero, OneSlowGpuHoldsUpEveryZeroCollectiveOfItsGroup) {
  for (const char* zero : kZeroModes) {
    SCOPED_TRACE(zero);
    auto calm = analytical(zero, R"({"seed": 1})");
    auto slow = analytical(zero, kOneSlowGpu);
    const auto fast_gpu = gpu_breakdown(slow, 0), slow_gpu = gpu_breakdown(slow, 5), calm_gpu = gpu_breakdown(calm, 0);
    EXPECT_NEAR(slow_gpu.compute, kSlowdown * calm_gpu.compute, 1e-6 * calm_gpu.compute);
    EXPECT_NEAR(fast_gpu.compute, calm_gpu.compute, 1e-6 * calm_gpu.compute);
    // At most the slow GPU's extra compute (some of it hides behind communication), at least half.
    const double extra = (kSlowdown - 1) * calm_gpu.compute;
    EXPECT_GT(slow.step_time_s, calm.step_time_s + 0.5 * extra);
    EXPECT_LE(slow.step_time_s, calm.step_time_s + extra * (1 + 1e-6));
    // GPU 0 computes as before and waits for GPU 5: the time the step grew by is its straggler
    // wait, and the transfers it now waits for.
    const double grew = slow.step_time_s - calm.step_time_s;
    EXPECT_GT(fast_gpu.straggler_wait, 0.5 * extra);
    EXPECT_NEAR(fast_gpu.straggler_wait + fast_gpu.exposed_communication - calm_gpu.exposed_communication, grew, 1e-6 * grew);
    if (!gathers_wait_for_compute(zero)) {
      EXPECT_NEAR(fast_gpu.straggler_wait, grew, 0.05 * extra);
    }
    EXPECT_NEAR(slow_gpu.straggler_wait, 0.0, 0.01 * extra);
    for (const auto& b : {fast_gpu, slow_gpu}) EXPECT_NEAR(b.total(), slow.step_time_s, 1e-6 * slow.step_time_s);
    test::expect_parts_sum_to_step(slow);
    EXPECT_EQ(slow.plan.memory.peak(), calm.plan.memory.peak());
    EXPECT_EQ(slow.plan.memory.peak(), analytical(zero, "").plan.memory.peak());
  }
}

// The same on SimGrid, through the command line (one SimGrid replay per process).
TEST(StragglersZero, OneSlowGpuOnSimGrid) {
  for (const char* zero : kZeroModes) {
    SCOPED_TRACE(zero);
    test::TempDir dir;
    dir.file("base.json", test::kValidScenario);
    auto run = [&](const std::string& name, const std::string& stragglers) {
      const auto o = test::run_dtsim({"run", dir.file(name + ".json", scenario(zero, "simgrid", stragglers)), "--format", "json", "-o",
                                      dir.path(name)},
                                     dir);
      EXPECT_EQ(o.code, 0) << o.err;
      return o.code == 0 ? nlohmann::json::parse(o.out) : nlohmann::json{};
    };
    const auto one = run("one", ""), calm = run("calm", R"({"seed": 1})"), slow = run("slow", kOneSlowGpu);
    ASSERT_FALSE(one.is_null() || calm.is_null() || slow.is_null());
    const double t1 = one["step_time_s"], tc = calm["step_time_s"], ts = slow["step_time_s"];
    EXPECT_NEAR(tc, t1, 1e-9 * t1);
    const double compute = calm["breakdown_s"]["compute"];
    const double extra = (kSlowdown - 1) * compute;
    EXPECT_GT(ts, tc + 0.5 * extra);
    EXPECT_LE(ts, tc + extra * (1 + 1e-6));
    const double wait = slow["breakdown_s"]["straggler_wait"];
    EXPECT_GT(wait, 0.5 * extra);
    if (!gathers_wait_for_compute(zero)) {
      EXPECT_NEAR(wait, ts - tc, 0.05 * extra);
    }
    double sum = 0;
    for (const auto& [part, seconds] : slow["breakdown_s"].items()) {
      EXPECT_GE(seconds.get<double>(), 0.0) << part;
      sum += seconds.get<double>();
    }
    EXPECT_NEAR(sum, ts, 1e-6 * ts);
    EXPECT_EQ(slow["memory"]["peak_bytes"], one["memory"]["peak_bytes"]);
  }
}

// Offload with every replica emitted, ZeRO-0 to 3: each replica's PCIe copies queue only behind
// its own (its GPUs' copy engines), and the other replicas' copies share the host links at the
// same moment (SimGrid's flows; the analytical price of all of them together). With no GPU slower
// than another the step is the representative's; with GPU 5 at 1.5x it grows by at most its
// slower compute.
TEST(StragglersZero, OffloadWithEveryReplicaGivesTheRepresentativeStep) {
  test::TempDir dir;
  dir.file("base.json", test::kValidScenario);
  auto simgrid = [&](const std::string& zero, const std::string& stragglers) {
    const auto o = test::run_dtsim({"run", dir.file("s.json", scenario(zero, "simgrid", stragglers)), "--format", "json", "-o", dir.path("out")}, dir);
    EXPECT_EQ(o.code, 0) << o.err;
    return o.code == 0 ? nlohmann::json::parse(o.out) : nlohmann::json{};
  };
  for (const char* stage : {R"("zero_stage": 0)", R"("zero_stage": 1)", R"("zero_stage": 2)", R"("zero_stage": 3)",
                            R"("zero_stage": 3, "framework": "deepspeed")", R"("zero_stage": 3, "framework": "fsdp")"})
    for (const char* offload : {R"("offload_optimizer": true)", R"("activation_offload": true)"}) {
      const std::string zero = std::string(stage) + ", " + offload;
      SCOPED_TRACE(zero);
      const auto one = analytical(zero, ""), calm = analytical(zero, R"({"seed": 1})"), slow = analytical(zero, kOneSlowGpu);
      EXPECT_GT(calm.plan.replicas, one.plan.replicas);
      EXPECT_NEAR(calm.step_time_s, one.step_time_s, 1e-9 * one.step_time_s);
      const double extra = (kSlowdown - 1) * calm.breakdown.compute;
      EXPECT_GT(slow.step_time_s, calm.step_time_s);
      EXPECT_LE(slow.step_time_s, calm.step_time_s + extra * (1 + 1e-6));
      const auto sg_one = simgrid(zero, ""), sg_calm = simgrid(zero, R"({"seed": 1})");
      ASSERT_FALSE(sg_one.is_null() || sg_calm.is_null());
      const double t1 = sg_one["step_time_s"], tc = sg_calm["step_time_s"];
      EXPECT_NEAR(tc, t1, 1e-9 * t1);
      EXPECT_NEAR(t1, one.step_time_s, 1e-9 * t1);  // both replays agree without slowdowns
    }
}

namespace {

// A small MoE transformer (4 blocks of 16 SwiGLU experts, top-2) on two DGX H100 nodes, data 16
// and expert 8: two expert-parallel groups, GPUs 0-7 and 8-15.
std::string moe_scenario(const std::string& parallelism, const std::string& backend, const std::string& stragglers) {
  return R"({"name": "moe", "model": {"kind": "transformer", "num_layers": 4, "hidden_size": 1024, "num_heads": 8,
      "ffn_hidden_size": 2048, "seq_len": 1024, "vocab_size": 1000, "mlp": "swiglu", "tied_embeddings": false,
      "linear_bias": false, "dropout": false, "num_experts": 16, "experts_per_token": 2, "expert_ffn_hidden_size": 2048},
    "hardware": {"device": "h100-sxm-80gb"}, "cluster": {"preset": "dgx-h100", "nodes": 2},
    "parallelism": {"data": 16, "expert": 8, "micro_batch_size": 2, )" + parallelism + R"(},
    "training": {"global_batch_size": 64, "attention": "flash"}, "simulation": {"backend": ")" + backend + "\"}" +
         (stragglers.empty() ? "" : ", \"stragglers\": " + stragglers) + "}";
}

results::Result moe(const std::string& parallelism, const std::string& stragglers) {
  test::TempDir dir;
  return results::simulate(config::load_scenario(dir.file("moe.json", moe_scenario(parallelism, "analytical", stragglers))));
}

std::size_t all_to_alls(const results::Result& r) {
  std::size_t n = 0;
  for (const auto& t : r.plan.graph.tasks) n += t.is_collective && t.collective().op == taskgraph::CollectiveOp::AllToAll ? 1 : 0;
  return n;
}

const char* kMoeZero[] = {R"("zero_stage": 0)", R"("zero_stage": 2)", R"("zero_stage": 3)"};

}  // namespace

// Every replica emitted: the replicas of one expert-parallel group join its all-to-alls (one per
// group where the representative's one named both groups), and the step is the representative's.
TEST(StragglersExperts, EveryReplicaJoiningItsGroupsAllToAllsGivesTheRepresentativeStep) {
  for (const char* zero : kMoeZero) {
    SCOPED_TRACE(zero);
    auto one = moe(zero, ""), every = moe(zero, R"({"seed": 1})");
    ASSERT_EQ(every.plan.replicas, 16);
    EXPECT_GT(all_to_alls(one), 0u);
    EXPECT_EQ(all_to_alls(every), 2 * all_to_alls(one));
    EXPECT_NEAR(every.step_time_s, one.step_time_s, 1e-9 * one.step_time_s);
    EXPECT_EQ(every.plan.memory.peak(), one.plan.memory.peak());
    test::expect_parts_sum_to_step(every);
  }
}

// GPU 5 at 1/k speed: its expert group waits for it at every all-to-all, the other group at the
// gradient synchronisation; either way the step grows by at most its extra compute.
TEST(StragglersExperts, OneSlowGpuHoldsUpItsExpertGroup) {
  for (const char* zero : kMoeZero) {
    SCOPED_TRACE(zero);
    auto calm = moe(zero, R"({"seed": 1})"), slow = moe(zero, kOneSlowGpu);
    const auto calm_gpu = gpu_breakdown(calm, 0), slow_gpu = gpu_breakdown(slow, 5);
    const auto same_group = gpu_breakdown(slow, 0), other_group = gpu_breakdown(slow, 8);
    EXPECT_NEAR(slow_gpu.compute, kSlowdown * calm_gpu.compute, 1e-6 * calm_gpu.compute);
    const double extra = (kSlowdown - 1) * calm_gpu.compute, grew = slow.step_time_s - calm.step_time_s;
    EXPECT_GT(grew, 0.5 * extra);
    EXPECT_LE(grew, extra * (1 + 1e-6));
    EXPECT_GT(same_group.straggler_wait, 0.5 * extra);
    EXPECT_GT(other_group.straggler_wait, 0.5 * extra);
    EXPECT_NEAR(slow_gpu.straggler_wait, 0.0, 0.01 * extra);
    for (const auto& b : {same_group, other_group, slow_gpu}) EXPECT_NEAR(b.total(), slow.step_time_s, 1e-6 * slow.step_time_s);
    test::expect_parts_sum_to_step(slow);
    EXPECT_EQ(slow.plan.memory.peak(), calm.plan.memory.peak());
  }
}

TEST(StragglersExperts, SameStepOnSimGrid) {
  test::TempDir dir;
  auto run = [&](const std::string& name, const std::string& stragglers) {
    const auto o = test::run_dtsim(
        {"run", dir.file(name + ".json", moe_scenario(R"("zero_stage": 3)", "simgrid", stragglers)), "--format", "json", "-o", dir.path(name)}, dir);
    EXPECT_EQ(o.code, 0) << o.err;
    return o.code == 0 ? nlohmann::json::parse(o.out)["step_time_s"].get<double>() : -1.0;
  };
  const double one = run("one", ""), calm = run("calm", R"({"seed": 1})"), slow = run("slow", kOneSlowGpu);
  EXPECT_NEAR(calm, one, 1e-9 * one);
  EXPECT_GT(slow, calm);
}

// The skewed router's most loaded GPU is stood for by another replica's GPU: refused.
TEST(StragglersExperts, SkewedRouterWithStragglersIsRefused) {
  test::TempDir dir;
  try {
    config::load_scenario(dir.file("moe.json", moe_scenario(R"("expert_skew": 0.3)", "analytical", kOneSlowGpu)));
    ADD_FAILURE() << "loaded";
  } catch (const InputError& e) {
    EXPECT_EQ(e.pointer() + ": " + e.reason(), "/stragglers: stragglers with expert parallelism are modelled with an even router: leave expert_skew at 0");
  }
}

// PipeDream all-reduces each stage's gradients after every backward: one collective the stage's
// replicas join, as ZeRO-2's reduce-scatters (each replica's own all-reduce over the whole group,
// queued behind the replica before's, made the step 2.5 times the representative's).
TEST(StragglersPipeDream, EveryReplicaJoiningEachAllReduceGivesTheRepresentativeStep) {
  const std::string p = R"("pipeline": 2, "micro_batch_size": 2, "pipeline_schedule": "pipedream", "data": 8)";
  auto run = [&](const std::string& stragglers) {
    return test::simulate_over_base(R"({"extends": "base.json", "cluster": {"nodes": 2}, "parallelism": {)" + p +
                                    R"(}, "training": {"global_batch_size": 128}, "simulation": {"backend": "analytical"})" +
                                    (stragglers.empty() ? "" : ", \"stragglers\": " + stragglers) + "}");
  };
  auto one = run(""), every = run(R"({"seed": 1})"), slow = run(kOneSlowGpu);
  ASSERT_EQ(every.plan.replicas, 8);
  EXPECT_NEAR(every.step_time_s, one.step_time_s, 1e-9 * one.step_time_s);
  EXPECT_GT(slow.step_time_s, every.step_time_s);
  test::expect_parts_sum_to_step(slow);
}

// Tensor parallelism 2 on SimGrid: GPU 5 is tensor rank 1 of the group {4, 5}, whose compute runs
// on GPU 4's host. Throttled for the first 50 ms, it slows the group as GPU 4's throttle does,
// and the report names it.
TEST(StragglersTensor, AThrottledTensorRankSlowsItsGroupOnSimGrid) {
  test::TempDir dir;
  dir.file("base.json", test::kValidScenario);
  auto run = [&](const std::string& name, const std::string& stragglers) {
    const std::string json = R"({"extends": "base.json", "cluster": {"nodes": 2},
        "parallelism": {"data": 8, "tensor": 2, "micro_batch_size": 4},
        "simulation": {"backend": "simgrid", "steps": 2}, "stragglers": )" + stragglers + "}";
    const auto o = test::run_dtsim({"run", dir.file(name + ".json", json), "--format", "json", "-o", dir.path(name)}, dir);
    EXPECT_EQ(o.code, 0) << o.err;
    return o.code == 0 ? nlohmann::json::parse(o.out) : nlohmann::json{};
  };
  auto throttle = [](int gpu) {
    return R"({"throttles": [{"gpu": )" + std::to_string(gpu) + R"(, "start_s": 0, "duration_s": 0.05, "slowdown": 2}]})";
  };
  const auto calm = run("calm", R"({"seed": 1})"), first = run("first", throttle(4)), second = run("second", throttle(5));
  ASSERT_FALSE(calm.is_null() || first.is_null() || second.is_null());
  const double tc = calm["step_time_s"], t4 = first["step_time_s"], t5 = second["step_time_s"];
  EXPECT_GT(t5, 1.1 * tc);
  EXPECT_NEAR(t5, t4, 1e-12 * t4);
  auto named = [](const nlohmann::json& r) {
    std::set<int> gpus;
    for (const auto& c : r["stragglers"]["critical_gpus"]) gpus.insert(c["gpu"].get<int>());
    return gpus;
  };
  EXPECT_TRUE(named(second).count(5));
  EXPECT_FALSE(named(second).count(4));
  EXPECT_TRUE(named(first).count(4));
}
