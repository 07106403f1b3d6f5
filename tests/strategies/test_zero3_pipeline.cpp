// ZeRO-3/FSDP inside pipeline stages, as torchtitan runs FSDP2 there: each stage's layers gathered
// before the first micro-batch's forward and kept to the end of the step (reshard_after_forward
// False), gradients accumulated unsharded and reduce-scattered once after the stage's last
// backward (torch/distributed/pipelining/stage.py).
#include <gtest/gtest.h>

#include <string>

#include "graph_queries.hpp"
#include "helpers.hpp"
#include "scenario_helpers.hpp"
#include "sim/config/scenario.hpp"
#include "sim/results/result.hpp"

using namespace dtsim;
using taskgraph::CollectiveOp;

namespace {

// GPT-2 on one DGX A100: 2 stages x data 4, micro-batch 4, global batch 64 (4 micro-batches).
config::Scenario two_stages(const test::TempDir& dir, const std::string& extra) {
  const std::string json = R"({"name": "zero3-pp", "model": {"preset": "gpt2"}, "hardware": {"device": "a100-sxm-80gb"},
    "cluster": {"preset": "dgx-a100", "nodes": 1},
    "parallelism": {"pipeline": 2, "data": 4, "micro_batch_size": 4)" + extra + R"(},
    "training": {"global_batch_size": 64}, "simulation": {"backend": "analytical"}})";
  return config::load_scenario(dir.file("zero3-pp.json", json));
}

}  // namespace

// One gather and one reduce-scatter per layer and step, over the stage's 4 data-parallel GPUs,
// 2 bytes a parameter each; the gathers in the first micro-batch's forward, each reduce-scatter
// after the stage's last backward.
TEST(Zero3Pipeline, GathersOncePerStepAndReducesAfterTheLastBackward) {
  test::TempDir dir;
  const auto s = two_stages(dir, R"(, "zero_stage": 3)");
  const auto r = results::simulate(s);
  const auto& g = r.plan.graph;
  const auto graph = s.model.build(models::BuildOptions{4, 2, models::Attention::Standard});
  const int layers = static_cast<int>(graph.layers.size());
  EXPECT_EQ(test::count_collectives(g, CollectiveOp::AllGather, "zero3 gather"), layers);
  EXPECT_EQ(test::count_collectives(g, CollectiveOp::ReduceScatter, "zero3 reduce"), layers);
  double gathered = 0, reduced = 0;
  for (const auto& t : g.tasks) {
    if (!t.is_collective || t.label().rfind("zero3 ", 0) != 0) continue;
    EXPECT_EQ(g.groups[static_cast<std::size_t>(t.collective().groups.at(0))].size(), 4u) << t.label();
    const bool gather = t.collective().op == CollectiveOp::AllGather;
    (gather ? gathered : reduced) += t.collective().bytes;
    if (gather) {
      EXPECT_NE(t.label().find(" mb0"), std::string::npos) << t.label();
    } else {  // after the last micro-batch's backward of its stage
      bool after_last = false;
      for (int d : t.deps) {
        const auto& dep = g.tasks[static_cast<std::size_t>(d)];
        after_last |= !dep.is_collective && dep.label().rfind("bwd", 0) == 0 && dep.label().find(" mb3") != std::string::npos;
      }
      EXPECT_TRUE(after_last || t.deps.size() > 1) << t.label();
    }
  }
  EXPECT_DOUBLE_EQ(gathered, 2 * graph.params());
  EXPECT_DOUBLE_EQ(reduced, 2 * graph.params());
  test::expect_parts_sum_to_step(r);
}

// Memory of the worst stage (N_s parameters): shards of (2 + 2 + 12) N_s / 4, plus the stage's
// gathered weights (2 N_s) and its unsharded gradients (2 N_s) held through the step.
TEST(Zero3Pipeline, HoldsTheStageGatheredAndItsGradientsUnsharded) {
  test::TempDir dir;
  const auto z3 = results::memory_only(two_stages(dir, R"(, "zero_stage": 3)"));
  const auto z0 = results::memory_only(two_stages(dir, ""));
  ASSERT_EQ(z3.worst_rank, z0.worst_rank);
  const double Ns = z0.memory.params / 2;
  EXPECT_NEAR(z3.memory.params, 2 * Ns / 4, 1.0);
  EXPECT_NEAR(z3.memory.optimizer, 12 * Ns / 4, 1.0);
  EXPECT_NEAR(z3.memory.gradients, 2 * Ns / 4 + 2 * Ns, 1.0);
  EXPECT_NEAR(z3.memory.other - z0.memory.other, 2 * Ns, 1.0);
  EXPECT_DOUBLE_EQ(z3.memory.activations, z0.memory.activations);
}

// The schedule's bubble stays the schedule's: ZeRO-3 adds the gathers before the first forward
// and the reduce-scatters after the last backward, not idle time between the passes.
TEST(Zero3Pipeline, TheBubbleIsStillTheSchedules) {
  test::TempDir dir;
  for (const char* schedule : {"1f1b", "gpipe"}) {
    SCOPED_TRACE(schedule);
    const std::string sched = std::string(R"(, "pipeline_schedule": ")") + schedule + "\"";
    const auto z0 = results::simulate(two_stages(dir, sched));
    const auto z3 = results::simulate(two_stages(dir, sched + R"(, "zero_stage": 3)"));
    EXPECT_NEAR(z3.breakdown.pipeline_bubble, z0.breakdown.pipeline_bubble, 0.05 * z0.breakdown.pipeline_bubble);
    test::expect_parts_sum_to_step(z3);
  }
}

// With HSDP inside the stages: shard groups of 2, the shard all-reduced across the 2 replicas.
TEST(Zero3Pipeline, HybridShardingInsideTheStages) {
  test::TempDir dir;
  const auto s = two_stages(dir, R"(, "zero_stage": 3, "shard_size": 2)");
  const auto r = results::simulate(s);
  const auto& g = r.plan.graph;
  const int layers = static_cast<int>(s.model.build(models::BuildOptions{4, 2, models::Attention::Standard}).layers.size());
  EXPECT_EQ(test::count_collectives(g, CollectiveOp::AllGather, "zero3 gather"), layers);
  EXPECT_EQ(test::count_collectives(g, CollectiveOp::ReduceScatter, "zero3 reduce"), layers);
  EXPECT_EQ(test::count_collectives(g, CollectiveOp::AllReduce, "zero3 reduce"), layers);
  test::expect_parts_sum_to_step(r);
}

TEST(Zero3Pipeline, RefusesTheFrameworksThatDoNotRunIt) {
  auto error = [](const std::string& extra) {
    return test::input_error_over_base(R"({"extends": "base.json", "parallelism": {"data": 4, "pipeline": 2, "micro_batch_size": 4, )"
                                       R"("zero_stage": 3)" + extra + "}}");
  };
  EXPECT_EQ(error(""), "");
  EXPECT_NE(error(R"(, "framework": "deepspeed")").find("incompatible with pipeline parallelism"), std::string::npos);
  EXPECT_NE(error(R"(, "framework": "fsdp")").find("framework \"megatron-lm\" models FSDP2 in each stage"), std::string::npos);
}
