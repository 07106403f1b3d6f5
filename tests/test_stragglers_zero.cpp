// Stragglers under ZeRO-2 and ZeRO-3 (Megatron's, DeepSpeed's and FSDP's): every replica emitted
// joins the one collective over its data-parallel group, so a slow GPU holds up the whole group.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

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
    if (!gathers_wait_for_compute(zero)) EXPECT_NEAR(fast_gpu.straggler_wait, grew, 0.05 * extra);
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
    if (!gathers_wait_for_compute(zero)) EXPECT_NEAR(wait, ts - tc, 0.05 * extra);
    double sum = 0;
    for (const auto& [part, seconds] : slow["breakdown_s"].items()) {
      EXPECT_GE(seconds.get<double>(), 0.0) << part;
      sum += seconds.get<double>();
    }
    EXPECT_NEAR(sum, ts, 1e-6 * ts);
    EXPECT_EQ(slow["memory"]["peak_bytes"], one["memory"]["peak_bytes"]);
  }
}

// Offload's PCIe copies with every replica emitted are not priced together: refused, with where.
TEST(StragglersZero, OffloadWithZero3StragglersIsRefused) {
  for (const char* offload : {R"("offload_optimizer": true)", R"("activation_offload": true)"}) {
    const std::string zero = std::string(R"("zero_stage": 3, )") + offload;
    EXPECT_EQ(test::input_error_over_base(scenario(zero, "analytical", kOneSlowGpu)),
              "/stragglers: stragglers with ZeRO stage 2 or 3 are not modelled with offload_optimizer or activation_offload");
    EXPECT_EQ(test::input_error_over_base(scenario(zero, "analytical", "")), "");
  }
}
