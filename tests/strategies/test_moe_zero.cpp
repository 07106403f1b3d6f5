// Issue 14 item 2: expert parallelism with ZeRO-2 and ZeRO-3. Dense weights shard, and their
// gradients reduce-scatter, over the data-parallel group (D GPUs); expert weights over the
// expert-data-parallel group (D / E GPUs holding the same experts). SimGrid runs once per process:
// each test here runs it at most once.
#include <gtest/gtest.h>

#include <string>

#include "sim/config/scenario.hpp"
#include "sim/results/capacity.hpp"
#include "sim/results/closed_form.hpp"
#include "sim/results/result.hpp"
#include "graph_queries.hpp"
#include "helpers.hpp"
#include "scenario_helpers.hpp"

using namespace dtsim;

namespace {

constexpr double kHidden = 1024, kExpertFfn = 2048, kExperts = 16, kLayers = 4, kVocab = 1000, kSeq = 1024;
constexpr int kD = 16, kE = 8;  // two DGX H100 nodes: data 16, expert 8, so expert-data groups of 2

// A small MoE transformer on two DGX H100 nodes: `layers` blocks, each an MoE layer of 16 SwiGLU
// experts (top-2), untied embeddings, no biases.
config::Scenario scenario(const test::TempDir& dir, const std::string& parallelism, const std::string& backend = "analytical",
                          int layers = static_cast<int>(kLayers)) {
  const std::string json = R"({"name": "moe-zero", "model": {"kind": "transformer", "num_layers": )" + std::to_string(layers) +
                           R"(, "hidden_size": 1024,
      "num_heads": 8, "ffn_hidden_size": 2048, "seq_len": 1024, "vocab_size": 1000, "mlp": "swiglu",
      "tied_embeddings": false, "linear_bias": false, "dropout": false, "num_experts": 16, "experts_per_token": 2,
      "expert_ffn_hidden_size": 2048},
    "hardware": {"device": "h100-sxm-80gb"}, "cluster": {"preset": "dgx-h100", "nodes": 2},
    "parallelism": {)" + parallelism + R"(},
    "training": {"global_batch_size": 64, "attention": "flash"}, "simulation": {"backend": ")" +
                           backend + R"("}})";
  return config::load_scenario(dir.file("moe-zero.json", json));
}

// Whole-model parameter counts: the experts by hand, the dense rest from the model (checked
// against the hand count of its large terms).
struct Counts {
  double experts = 0, dense = 0;
};

Counts counts(const config::Scenario& s) {
  // A SwiGLU expert: gate and up projections h x f, down projection f x h.
  const double per_expert = 3 * kHidden * kExpertFfn;  // 6,291,456
  Counts c;
  c.experts = kLayers * kExperts * per_expert;  // 402,653,184
  const auto g = s.model.build(models::BuildOptions{1, 2, models::Attention::Flash});
  double experts = 0;
  for (const auto& l : g.layers) experts += l.expert_params();
  EXPECT_DOUBLE_EQ(experts, c.experts);
  c.dense = g.params() - experts;
  // Q, K, V, O (4 h^2) and the router (16 h) per layer, input and output embeddings (2 x vocab x h),
  // learned positions (seq x h); norms add a few thousand more.
  const double large = kLayers * (4 * kHidden * kHidden + kExperts * kHidden) + 2 * kVocab * kHidden + kSeq * kHidden;
  EXPECT_GE(c.dense, large);
  EXPECT_LT(c.dense, large + 20 * kHidden);
  return c;
}

std::size_t group_size(const taskgraph::TaskGraph& g, const taskgraph::Task& t) {
  return g.groups[static_cast<std::size_t>(t.collective().groups.at(0))].size();
}

}  // namespace

// bf16 with Adam: 2 bytes of weights, 2 of gradients and 12 of optimizer state (fp32 master, m, v)
// per parameter. Each GPU holds the dense weights (N_d) and 1/E of the experts (N_x / E).
//   ZeRO-1: weights 2 (N_d + N_x/E), gradients 2 (N_d + N_x/E), optimizer 12 (N_d/D + N_x/E/(D/E))
//   ZeRO-2: gradients sharded too: 2 (N_d/D + N_x/E/(D/E)) = 2 (N_d + N_x)/D
//   ZeRO-3: weights sharded too:   2 (N_d + N_x)/D
// With D = 16 and E = 8 the experts' shard is N_x / 8 / 2 = N_x / 16: every GPU holds 1/D of every
// parameter's state under ZeRO-3, as without expert parallelism, but gathers its experts from 2 GPUs.
TEST(MoeZero, ModelStateMemoryShardsDenseOverDataAndExpertsOverExpertData) {
  test::TempDir dir;
  const auto one = scenario(dir, R"("data": 16, "expert": 8, "zero_stage": 1)");
  const auto c = counts(one);
  const double D = kD, E = kE, Nd = c.dense, Nx = c.experts;
  const auto z1 = results::memory_only(one).memory;
  const auto z2 = results::memory_only(scenario(dir, R"("data": 16, "expert": 8, "zero_stage": 2)")).memory;
  const auto z3 = results::memory_only(scenario(dir, R"("data": 16, "expert": 8, "zero_stage": 3)")).memory;
  EXPECT_NEAR(z1.params, 2 * (Nd + Nx / E), 1.0);
  EXPECT_NEAR(z1.gradients, 2 * (Nd + Nx / E), 1.0);
  EXPECT_NEAR(z1.optimizer, 12 * (Nd / D + Nx / E / (D / E)), 1.0);
  EXPECT_NEAR(z2.params, 2 * (Nd + Nx / E), 1.0);
  EXPECT_NEAR(z2.gradients, 2 * (Nd / D + Nx / E / (D / E)), 1.0);
  EXPECT_NEAR(z2.optimizer, 12 * (Nd / D + Nx / E / (D / E)), 1.0);
  EXPECT_NEAR(z3.params, 2 * (Nd / D + Nx / E / (D / E)), 1.0);
  EXPECT_NEAR(z3.gradients, 2 * (Nd / D + Nx / E / (D / E)), 1.0);
  EXPECT_NEAR(z3.optimizer, 12 * (Nd / D + Nx / E / (D / E)), 1.0);
  // All of it: (2 + 2 + 12) (N_d + N_x) / D.
  EXPECT_NEAR(z3.params + z3.gradients + z3.optimizer, 16 * (Nd + Nx) / D, 3.0);
  // ZeRO-3 holds one gathered layer and the next one's prefetch beside the shards: a layer's dense
  // part and its 2 experts on this GPU, 2 bytes each.
  const double layer = (Nd - 2 * kVocab * kHidden - kSeq * kHidden) / kLayers + Nx / kLayers / E;
  EXPECT_NEAR(z3.other - z1.other, 2 * 2 * layer, 2 * 2 * 20 * kHidden);
}

// ZeRO-2: every micro-batch but the last reduce-scatters its gradients, the dense ones over the
// 16 data-parallel GPUs and the experts' over the 2 holding the same experts; after the step both
// parameter sets are gathered back over the same groups.
TEST(MoeZero, Zero2ReduceScattersExpertGradientsOverExpertDataGroups) {
  test::TempDir dir;
  const auto s = scenario(dir, R"("data": 16, "expert": 8, "zero_stage": 2)");
  const auto c = counts(s);
  const auto r = results::simulate(s);
  const auto& g = r.plan.graph;
  using taskgraph::CollectiveOp;
  const int micro = 64 / kD;  // 4 micro-batches of 1
  EXPECT_EQ(test::count_collectives(g, CollectiveOp::ReduceScatter, "zero2 reduce experts"), micro - 1);
  EXPECT_EQ(test::count_collectives(g, CollectiveOp::ReduceScatter, "zero2 reduce c0"), micro - 1);
  const auto* dense = test::find_task(g, "zero2 reduce c0 mb0");
  const auto* expert = test::find_task(g, "zero2 reduce experts c0 mb0");
  ASSERT_TRUE(dense && expert);
  EXPECT_EQ(group_size(g, *dense), static_cast<std::size_t>(kD));
  EXPECT_EQ(dense->collective().groups.size(), 1u);  // tensor 1: one data-parallel group
  EXPECT_DOUBLE_EQ(dense->collective().bytes, 2 * c.dense);
  EXPECT_EQ(group_size(g, *expert), static_cast<std::size_t>(kD / kE));
  EXPECT_EQ(expert->collective().groups.size(), static_cast<std::size_t>(kE));  // one per expert rank
  EXPECT_DOUBLE_EQ(expert->collective().bytes, 2 * c.experts / kE);
  const auto* gather = test::find_task(g, "zero gather params");
  const auto* gather_experts = test::find_task(g, "zero gather expert params");
  ASSERT_TRUE(gather && gather_experts);
  EXPECT_EQ(group_size(g, *gather), static_cast<std::size_t>(kD));
  EXPECT_DOUBLE_EQ(gather->collective().bytes, 2 * c.dense);
  EXPECT_EQ(group_size(g, *gather_experts), static_cast<std::size_t>(kD / kE));
  EXPECT_DOUBLE_EQ(gather_experts->collective().bytes, 2 * c.experts / kE);
  // The last micro-batch's gradients go in buckets, as under ZeRO-1.
  EXPECT_GT(test::count_collectives(g, CollectiveOp::ReduceScatter, "reduce_scatter expert bucket"), 0);
  test::expect_parts_sum_to_step(r);
}

// ZeRO-3: before each layer's forward and backward its dense weights are gathered over the 16
// data-parallel GPUs and its experts' over the 2 expert-data-parallel ones; after its backward
// both gradients are reduce-scattered over the same groups. The MoE layers keep their all-to-alls.
TEST(MoeZero, Zero3GathersExpertsOverExpertDataGroups) {
  test::TempDir dir;
  const auto s = scenario(dir, R"("data": 16, "expert": 8, "zero_stage": 3)");
  const auto c = counts(s);
  const auto r = results::simulate(s);
  const auto& g = r.plan.graph;
  using taskgraph::CollectiveOp;
  const int micro = 64 / kD;
  const int moe = static_cast<int>(kLayers);
  EXPECT_EQ(test::count_collectives(g, CollectiveOp::AllGather, "zero3 gather experts of"), moe * micro * 2);
  EXPECT_EQ(test::count_collectives(g, CollectiveOp::ReduceScatter, "zero3 reduce experts of"), moe * micro);
  EXPECT_EQ(test::count_collectives(g, CollectiveOp::AllToAll, ""), moe * micro * 2 * 2);  // dispatch and combine, forward and backward
  const double expert_layer = c.experts / kLayers / kE;  // this GPU's 2 experts of one layer
  int checked = 0;
  for (const auto& t : g.tasks) {
    if (!t.is_collective || t.label().rfind("zero3 ", 0) != 0) continue;
    const bool experts = t.label().find("experts of") != std::string::npos;
    const bool block = t.label().find("embedding") == std::string::npos && t.label().find("head") == std::string::npos;
    EXPECT_EQ(group_size(g, t), static_cast<std::size_t>(experts ? kD / kE : kD)) << t.label();
    EXPECT_EQ(t.collective().groups.size(), static_cast<std::size_t>(experts ? kE : 1)) << t.label();
    if (experts) {
      EXPECT_DOUBLE_EQ(t.collective().bytes, 2 * expert_layer) << t.label();
    } else if (block) {  // a block's attention, norms and router
      EXPECT_NEAR(t.collective().bytes, 2 * (kHidden * kHidden * 4 + kExperts * kHidden), 2 * 4 * kHidden) << t.label();
    }
    ++checked;
  }
  EXPECT_GT(checked, 3 * moe * micro);
  // Each MoE layer's forward starts once its experts are gathered.
  const auto* gather = test::find_task(g, "zero3 gather experts of block.0 c0 mb0");
  ASSERT_TRUE(gather) << "no expert gather for block.0";
  bool waits = false;
  for (const auto& t : g.tasks)
    if (!t.is_collective && t.label().rfind("fwd block.0 c0 mb0", 0) == 0)
      for (int d : t.deps) waits |= &g.tasks[static_cast<std::size_t>(d)] == gather;
  EXPECT_TRUE(waits);
  // No gradient buckets after backward: every layer's gradients were reduce-scattered already.
  EXPECT_EQ(test::count_collectives(g, CollectiveOp::ReduceScatter, "reduce_scatter expert bucket"), 0);
  test::expect_parts_sum_to_step(r);
}

// The closed form leaves expert parallelism to the replay, with any ZeRO stage.
TEST(MoeZero, ClosedFormLeavesExpertParallelismToTheReplay) {
  test::TempDir dir;
  for (int zero : {1, 2, 3})
    EXPECT_FALSE(results::closed_form_gap(scenario(dir, R"("data": 16, "expert": 8, "zero_stage": )" + std::to_string(zero)))
                     .empty());
}

// A small EP + ZeRO-3 step through both replays: positive, parts >= 0 summing to it, close to each
// other (SimGrid shares the links between concurrent collectives, the analytical replay less so).
TEST(MoeZero, Zero3StepOnTheAnalyticalReplay) {
  test::TempDir dir;
  const auto r = results::simulate(scenario(dir, R"("data": 16, "expert": 8, "zero_stage": 3)", "analytical", 2));
  EXPECT_EQ(r.timeline.backend, "analytical");
  test::expect_parts_sum_to_step(r);
  EXPECT_GT(r.breakdown.exposed_communication, 0.0);
}

TEST(MoeZero, Zero3StepOnSimGrid) {
  test::TempDir dir;
  const auto r = results::simulate(scenario(dir, R"("data": 16, "expert": 8, "zero_stage": 3)", "simgrid", 2));
  EXPECT_EQ(r.timeline.backend, "simgrid");
  test::expect_parts_sum_to_step(r);
  EXPECT_GT(r.all_to_all_s, 0.0);
}

// The capacity planner keeps the scenario's expert parallelism: data sizes are multiples of it, and
// ZeRO shards the experts over data / expert GPUs. Mixtral 8x7B with EP8 on one DGX H100 node
// (ZeRO-1) does not fit: each GPU holds 1/8 of the 45B expert weights whole (D / E = 1), with
// their gradients and Adam state, about 16 x 45e9 / 8 = 90 GB before the dense part.
TEST(MoeCapacity, FewestGpusThatFitKeepExpertParallelism) {
  test::TempDir dir;
  const std::string json = R"({"name": "mixtral-one-node", "model": {"preset": "mixtral-8x7b", "seq_len": 4096},
    "hardware": {"device": "h100-sxm-80gb"}, "cluster": {"preset": "dgx-h100", "nodes": 1},
    "parallelism": {"data": 8, "expert": 8, "zero_stage": 1, "recompute": "selective"},
    "training": {"global_batch_size": 64, "attention": "flash"}, "simulation": {"backend": "analytical"}})";
  const auto s = config::load_scenario(dir.file("mixtral.json", json));
  const auto here = results::memory_only(s);
  EXPECT_FALSE(here.fits);
  ASSERT_TRUE(here.fewest_fit);
  const auto& fit = here.fewest_fit;
  EXPECT_EQ(fit->expert, 8);
  EXPECT_EQ(fit->data % 8, 0);
  EXPECT_EQ(fit->gpus, fit->data * fit->tensor * fit->pipeline);
  // The only smaller shape with data a multiple of 8 is 8 GPUs, where D / E = 1 leaves each GPU its
  // experts' whole state under any ZeRO stage (above); on 16 ZeRO-3 shards it over 2.
  EXPECT_EQ(fit->gpus, 16);
  // The plan it found, planned in full, holds what it says and fits.
  config::Scenario f = s;
  f.cluster.nodes = fit->gpus / 8;
  f.parallelism.data = fit->data, f.parallelism.tensor = fit->tensor, f.parallelism.pipeline = fit->pipeline;
  f.parallelism.zero_stage = fit->zero_stage, f.parallelism.recompute = fit->recompute;
  f.parallelism.sequence_parallel = false;
  const auto r = results::memory_only(f);
  EXPECT_TRUE(r.fits);
  EXPECT_NEAR(r.memory.peak(), fit->peak_bytes, 1e-6 * fit->peak_bytes);  // the reserve included
  const auto j = results::plan_json(here);
  EXPECT_EQ(j["fewest_gpus_that_fit"]["expert"].get<int>(), 8);
}
