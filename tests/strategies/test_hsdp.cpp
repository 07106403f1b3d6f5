// Hybrid sharding (HSDP, parallelism.shard_size): ZeRO-3 inside groups of S consecutive data
// ranks, replicas across the D / S groups. Memory of the model states over S, not D; each layer
// gathered in its shard group, its gradients reduce-scattered there and the shard all-reduced
// across the replicate group (PyTorch FSDP2's foreach_reduce).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "graph_queries.hpp"
#include "helpers.hpp"
#include "scenario_helpers.hpp"
#include "sim/config/import_run.hpp"
#include "sim/config/scenario.hpp"
#include "sim/results/closed_form.hpp"
#include "sim/results/result.hpp"

using namespace dtsim;
using taskgraph::CollectiveOp;

namespace {

// GPT-2 (the base scenario's model) on `nodes` DGX A100s, data-parallel over every GPU,
// micro-batch 4, global batch 64 x nodes, with `extra` parallelism keys.
config::Scenario gpt2(const test::TempDir& dir, const std::string& extra, int nodes = 1) {
  const std::string json = R"({"name": "hsdp", "model": {"preset": "gpt2"}, "hardware": {"device": "a100-sxm-80gb"},
    "cluster": {"preset": "dgx-a100", "nodes": )" + std::to_string(nodes) + R"(},
    "parallelism": {"micro_batch_size": 4)" + extra + R"(},
    "training": {"global_batch_size": )" + std::to_string(64 * nodes) + R"(}, "simulation": {"backend": "analytical"}})";
  return config::load_scenario(dir.file("hsdp.json", json));
}

}  // namespace

// shard_size = data is plain ZeRO-3: the same result, byte for byte.
TEST(Hsdp, ShardSizeOfEveryDataRankIsPlainZero3) {
  test::TempDir dir;
  for (const char* fw : {"megatron-lm", "fsdp"}) {
    SCOPED_TRACE(fw);
    const std::string f = std::string(R"(, "zero_stage": 3, "framework": ")") + fw + "\"";
    const auto plain = results::simulate(gpt2(dir, f));
    const auto same = results::simulate(gpt2(dir, f + R"(, "shard_size": 8)"));
    EXPECT_EQ(results::to_json(plain, false).dump(), results::to_json(same, false).dump());
  }
}

// Model states over the shard group: (2 + 2 + 12) N / S with bf16 and Adam. S = 1 keeps full
// replicas: weights, gradients and optimizer state as without ZeRO, and nothing gathered.
TEST(Hsdp, ModelStatesAreShardedOverTheShardGroupOnly) {
  test::TempDir dir;
  const auto zero0 = results::memory_only(gpt2(dir, ""));
  const double N = zero0.params;
  const auto full = results::memory_only(gpt2(dir, R"(, "zero_stage": 3)")).memory;
  const auto hsdp = results::memory_only(gpt2(dir, R"(, "zero_stage": 3, "shard_size": 4)")).memory;
  const auto one = results::memory_only(gpt2(dir, R"(, "zero_stage": 3, "shard_size": 1)")).memory;
  EXPECT_NEAR(full.params, 2 * N / 8, 1.0);
  EXPECT_NEAR(hsdp.params, 2 * N / 4, 1.0);
  EXPECT_NEAR(hsdp.gradients, 2 * N / 4, 1.0);
  EXPECT_NEAR(hsdp.optimizer, 12 * N / 4, 1.0);
  EXPECT_DOUBLE_EQ(hsdp.other, full.other);  // one gathered layer and its prefetch, as before
  EXPECT_DOUBLE_EQ(one.params, zero0.memory.params);
  EXPECT_DOUBLE_EQ(one.gradients, zero0.memory.gradients);
  EXPECT_DOUBLE_EQ(one.optimizer, zero0.memory.optimizer);
  EXPECT_DOUBLE_EQ(one.other, zero0.memory.other);
}

// Two DGX A100s, data 16, shard groups of 8: each layer gathered within one node (2 bytes a
// parameter), reduce-scattered there, then its shard (N_l / 8 parameters, 2 bytes) all-reduced
// across the 2 nodes. Per micro-batch: 2 gathers (forward, backward), 1 reduce-scatter, 1 all-reduce.
TEST(Hsdp, GathersInTheNodeAndAllReducesTheShardAcrossNodes) {
  test::TempDir dir;
  const auto s = gpt2(dir, R"(, "zero_stage": 3, "shard_size": 8)", 2);
  const auto r = results::simulate(s);
  const auto& g = r.plan.graph;
  const auto graph = s.model.build(models::BuildOptions{4, 2, models::Attention::Standard});
  const int layers = static_cast<int>(graph.layers.size()), micro = 64 * 2 / (16 * 4);
  EXPECT_EQ(test::count_collectives(g, CollectiveOp::AllGather, "zero3 gather"), 2 * layers * micro);
  EXPECT_EQ(test::count_collectives(g, CollectiveOp::ReduceScatter, "zero3 reduce"), layers * micro);
  EXPECT_EQ(test::count_collectives(g, CollectiveOp::AllReduce, "zero3 reduce"), layers * micro);
  const auto& block = graph.layers[1];
  const auto* gather = test::find_task(g, "zero3 gather " + block.name + " c0 mb0");
  const auto* reduce = test::find_task(g, "zero3 reduce " + block.name + " c0 mb0");
  const auto* across = test::find_task(g, "zero3 reduce " + block.name + " c0 mb0 across replicas");
  ASSERT_TRUE(gather && reduce && across);
  EXPECT_DOUBLE_EQ(gather->collective().bytes, 2 * block.params());
  EXPECT_DOUBLE_EQ(reduce->collective().bytes, 2 * block.params());
  EXPECT_DOUBLE_EQ(across->collective().bytes, 2 * block.params() / 8);
  // Both nodes' shard groups in one collective, each the 8 GPUs of one node; 8 replicate groups
  // of one GPU per node.
  ASSERT_EQ(gather->collective().groups.size(), 2u);
  for (int k : gather->collective().groups) {
    const auto& ranks = g.groups[static_cast<std::size_t>(k)];
    ASSERT_EQ(ranks.size(), 8u);
    EXPECT_EQ(std::set<int>(ranks.begin(), ranks.end()).size(), 8u);
    for (int gpu : ranks) EXPECT_EQ(gpu / 8, ranks.front() / 8);
  }
  ASSERT_EQ(across->collective().groups.size(), 8u);
  for (int k : across->collective().groups) {
    const auto& ranks = g.groups[static_cast<std::size_t>(k)];
    ASSERT_EQ(ranks.size(), 2u);
    EXPECT_NE(ranks[0] / 8, ranks[1] / 8);
  }
  // The all-reduce follows the reduce-scatter it reduces further.
  bool after = false;
  for (int d : across->deps) after |= &g.tasks[static_cast<std::size_t>(d)] == reduce;
  EXPECT_TRUE(after);
  test::expect_parts_sum_to_step(r);
}

// FSDP's own ZeRO-3 under HSDP: each unit's reduce-scatter then its all-reduce across replicas,
// carrying the shard: 1/8 of the reduce-scatter's bytes. Twice the weights and optimizer state
// of full sharding over both nodes.
TEST(Hsdp, FsdpReducesTheShardAcrossReplicas) {
  test::TempDir dir;
  const std::string fsdp = R"(, "zero_stage": 3, "framework": "fsdp")";
  const auto full = results::simulate(gpt2(dir, fsdp, 2));
  const auto hsdp = results::simulate(gpt2(dir, fsdp + R"(, "shard_size": 8)", 2));
  const auto& g = hsdp.plan.graph;
  EXPECT_EQ(test::count_collectives(g, CollectiveOp::ReduceScatter, "zero3 reduce-scatter"),
            test::count_collectives(g, CollectiveOp::AllReduce, "zero3 all-reduce across replicas"));
  EXPECT_GT(test::count_collectives(g, CollectiveOp::AllReduce, "zero3 all-reduce across replicas"), 0);
  double scattered = 0, across = 0;
  for (const auto& t : g.tasks)
    if (t.is_collective && t.label().rfind("zero3 reduce-scatter", 0) == 0) scattered += t.collective().bytes;
    else if (t.is_collective && t.label().rfind("zero3 all-reduce across replicas", 0) == 0) across += t.collective().bytes;
  EXPECT_DOUBLE_EQ(across, scattered / 8);
  EXPECT_NEAR(hsdp.memory.params, 2 * full.memory.params, 2.0);
  EXPECT_NEAR(hsdp.memory.optimizer, 2 * full.memory.optimizer, 2.0);
  test::expect_parts_sum_to_step(hsdp);
}

TEST(Hsdp, RefusesWhatItDoesNotModel) {
  auto error = [](const std::string& parallelism) {
    return test::input_error_over_base(R"({"extends": "base.json", "parallelism": {"data": 8, "micro_batch_size": 4, )" +
                                       parallelism + "}}");
  };
  EXPECT_NE(error(R"("shard_size": 4)").find("/parallelism/shard_size: shards ZeRO-3's parameters in groups"), std::string::npos)
      << error(R"("shard_size": 4)");
  EXPECT_NE(error(R"("zero_stage": 3, "shard_size": 3)").find("3 does not divide data (8)"), std::string::npos);
  EXPECT_NE(error(R"("zero_stage": 3, "shard_size": 1, "framework": "fsdp")").find("give zero_stage 0"), std::string::npos);
  EXPECT_EQ(error(R"("zero_stage": 3, "shard_size": 1)"), "");
  EXPECT_EQ(error(R"("fsdp": true, "shard_size": 2, "framework": "fsdp")"), "");
}

// torchtitan's data_parallel_shard_degree x data_parallel_replicate_degree is HSDP; replicate
// alone is DDP; FSDP with pipeline stages imports as dtsim's per-layer ZeRO-3 (megatron-lm).
TEST(Hsdp, TorchtitanDegreesImportAsShardSize) {
  auto load = [](const std::string& degrees) {
    return config::import_torchtitan_toml("[model]\nname = \"llama3\"\nflavor = \"8B\"\n[parallelism]\n" + degrees, "x.toml");
  };
  const auto hsdp = load("data_parallel_replicate_degree = 2\ndata_parallel_shard_degree = 8\npipeline_parallel_degree = 2\n");
  EXPECT_EQ(hsdp.parallelism["zero_stage"], 3);
  EXPECT_EQ(hsdp.parallelism["shard_size"], 8);
  EXPECT_EQ(hsdp.parallelism["pipeline"], 2);
  EXPECT_EQ(hsdp.parallelism["framework"], "megatron-lm");
  EXPECT_EQ(hsdp.gpus, 32);
  const auto ddp = load("data_parallel_replicate_degree = 4\ndata_parallel_shard_degree = 1\n");
  EXPECT_FALSE(ddp.parallelism.contains("zero_stage"));
  EXPECT_FALSE(ddp.parallelism.contains("shard_size"));
  EXPECT_EQ(ddp.parallelism["framework"], "fsdp");
}

// The closed form prices HSDP as the replay runs it: per layer its gather in the shard groups,
// its reduce-scatter there and the shard's all-reduce across replicas (ZeRO-3's term). One stage:
// the same sums in another order.
TEST(Hsdp, ClosedFormAgreesWithTheAnalyticalReplay) {
  test::TempDir dir;
  for (const auto& [extra, nodes] : {std::pair{R"(, "zero_stage": 3, "shard_size": 4)", 1}, std::pair{R"(, "zero_stage": 3, "shard_size": 2)", 1},
                                     std::pair{R"(, "zero_stage": 3, "shard_size": 8)", 2}}) {
    SCOPED_TRACE(std::string(extra) + " on " + std::to_string(nodes));
    const auto s = gpt2(dir, extra, nodes);
    ASSERT_EQ(results::closed_form_gap(s), "");
    const auto replayed = results::simulate(s);
    const auto estimated = results::ClosedForm(s).estimate(s);
    EXPECT_NEAR(estimated.step_time_s, replayed.step_time_s, 1e-9 * replayed.step_time_s);
    EXPECT_EQ(estimated.memory.peak(), replayed.memory.peak());
  }
  EXPECT_NE(results::closed_form_gap(gpt2(dir, R"(, "zero_stage": 3, "shard_size": 1)")), "");
}
