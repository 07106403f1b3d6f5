// Issue 14: mixture-of-experts models, expert parallelism and its all-to-alls, load skew.
#include <gtest/gtest.h>

#include <algorithm>

#include "models/model_graph.hpp"
#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "sim/results/result.hpp"
#include "helpers.hpp"
#include "moe_scenario.hpp"
#include "scenario_helpers.hpp"

using namespace dtsim;

namespace {

models::ModelSpec preset(const std::string& name) { return config::load_model_preset(name); }

models::ModelGraph whole(const models::ModelSpec& m) {
  return m.build(models::BuildOptions{1, 2, models::Attention::Flash});
}

}  // namespace

// Published totals and active counts. Where a publisher gives its figure to two significant digits
// ("37B", "3.3B") the check allows that figure's own rounding when it is looser than 1 %.
TEST(MoeModels, TotalParametersMatchPublishedWithinOnePercent) {
  // Mistral AI, "Mixtral of experts" (2023): 46.7B total.
  EXPECT_NEAR(whole(preset("mixtral-8x7b")).params() / 46.7e9, 1.0, 0.01);
  // Qwen3-30B-A3B model card: 30.5B total.
  EXPECT_NEAR(whole(preset("qwen3-30b-a3b")).params() / 30.5e9, 1.0, 0.01);
  // Qwen3-235B-A22B model card: 235B total, a three-digit figure.
  EXPECT_NEAR(whole(preset("qwen3-235b-a22b")).params() / 1e9, 235.0, 0.5);
  // DeepSeek-V3 technical report, Sec. 4.2: 671B total (without the multi-token-prediction module).
  EXPECT_NEAR(whole(preset("deepseek-v3")).params() / 671e9, 1.0, 0.01);
  // gpt-oss model card: 116.8B total.
  EXPECT_NEAR(whole(preset("gpt-oss-120b")).params() / 116.8e9, 1.0, 0.01);
}

TEST(MoeModels, ActiveParametersMatchPublished) {
  // Mistral AI: "only uses 12.9B parameters per token" (embeddings counted).
  EXPECT_NEAR(whole(preset("mixtral-8x7b")).active_params() / 12.9e9, 1.0, 0.01);
  // gpt-oss model card: 5.13B active, the unembedding counted and the input embedding not.
  EXPECT_NEAR(whole(preset("gpt-oss-120b")).active_params(false) / 5.13e9, 1.0, 0.01);
  // DeepSeek-V3: "37B are activated for each token", a two-digit figure (37 +- 0.5B) that does not
  // say whether the embedding tables count: it lies between the counts without the input table
  // (36.6B, OpenAI's convention) and with it (37.6B).
  const auto ds = whole(preset("deepseek-v3"));
  EXPECT_NEAR(ds.active_params(false) / 1e9, 37.0, 0.5);
  EXPECT_LT(ds.active_params(false), 37e9);
  EXPECT_GT(ds.active_params(), 37e9);
  // Qwen3-30B-A3B: "3.3B activated", 3.3 +- 0.05B.
  EXPECT_NEAR(whole(preset("qwen3-30b-a3b")).active_params() / 1e9, 3.3, 0.06);
  // Qwen3-235B-A22B: "22B activated", 22 +- 0.5B.
  EXPECT_NEAR(whole(preset("qwen3-235b-a22b")).active_params() / 1e9, 22.0, 0.5);
}

TEST(MoeModels, ExpertParallelismSplitsOnlyTheExperts) {
  const auto m = preset("mixtral-8x7b");
  models::BuildOptions one{1, 2, models::Attention::Flash};
  models::BuildOptions eight = one;
  eight.expert = 8;
  const auto a = m.build(one), b = m.build(eight);
  double ea = 0, eb = 0;
  for (const auto& l : a.layers) ea += l.expert_params();
  for (const auto& l : b.layers) eb += l.expert_params();
  EXPECT_NEAR(eb * 8, ea, 1.0);
  EXPECT_NEAR(a.params() - ea, b.params() - eb, 1.0);  // the dense part stays whole
  // Model FLOPs follow the active parameters, whatever the split: every GPU computes its own
  // tokens' worth of expert work (top-2 of 8 experts).
  EXPECT_NEAR(a.model_flops() / b.model_flops(), 1.0, 1e-9);
  const double tokens = 32768;
  EXPECT_GT(a.model_flops(), 6.0 * (a.active_params() - 32000.0 * 4096) * tokens * 0.99);
}

namespace {

std::vector<const taskgraph::Task*> all_to_alls(const taskgraph::TaskGraph& g) {
  std::vector<const taskgraph::Task*> out;
  for (const auto& t : g.tasks)
    if (t.is_collective && t.collective().op == taskgraph::CollectiveOp::AllToAll) out.push_back(&t);
  return out;
}

}  // namespace

// Each MoE layer dispatches and combines its tokens by all-to-all over the expert-parallel group,
// forward and backward: S = tokens x top-k x hidden x 2 bytes, each GPU sending S (ep-1)/ep.
TEST(ExpertParallelism, AllToAllDispatchAndCombinePerMoeLayer) {
  test::TempDir dir;
  const auto s = moe_scenario(dir, 2, R"("data": 16, "expert": 8)");
  const auto r = results::simulate(s);
  const auto a2a = all_to_alls(r.plan.graph);
  // 4 MoE layers x 4 micro-batches (64 / 16) x (dispatch + combine) x (forward + backward).
  ASSERT_EQ(a2a.size(), 4u * 4u * 2u * 2u);
  for (const auto* t : a2a) {
    EXPECT_EQ(t->collective().algorithm, taskgraph::Algorithm::Direct);
    EXPECT_DOUBLE_EQ(t->collective().bytes, 1024.0 * 2 * 1024 * 2);
    ASSERT_EQ(t->collective().groups.size(), 2u);  // both nodes' groups at once, sharing the network
    for (int g : t->collective().groups) {
      const auto& ranks = r.plan.graph.groups[static_cast<std::size_t>(g)];
      ASSERT_EQ(ranks.size(), 8u);
      EXPECT_EQ(ranks.front() / 8, ranks.back() / 8);  // consecutive data ranks: one node
    }
  }
  EXPECT_GT(r.all_to_all_s, 0.0);
  test::expect_parts_sum_to_step(r);
}

// The same all-to-all across two nodes goes through the NICs (50 GB/s) instead of NVLink (450 GB/s).
TEST(ExpertParallelism, AllToAllAcrossNodesCostsMoreThanInsideOne) {
  test::TempDir dir;
  const auto inside = results::simulate(moe_scenario(dir, 2, R"("data": 16, "expert": 8)"));
  const auto across = results::simulate(moe_scenario(dir, 2, R"("data": 16, "expert": 16)"));
  EXPECT_GT(across.all_to_all_s, 3.0 * inside.all_to_all_s);
  EXPECT_GT(across.all_to_all_s / across.step_time_s, 3.0 * inside.all_to_all_s / inside.step_time_s);
}

// Megatron-Core: dense gradients over all data-parallel GPUs, expert gradients over the
// data / expert GPUs holding the same experts.
TEST(ExpertParallelism, ExpertGradientsSumOverExpertDataParallelGroups) {
  test::TempDir dir;
  const auto r = results::simulate(moe_scenario(dir, 2, R"("data": 16, "expert": 4)"));
  bool dense = false, expert = false;
  for (const auto& t : r.plan.graph.tasks) {
    if (!t.is_collective || t.collective().op != taskgraph::CollectiveOp::AllReduce) continue;
    const auto size = r.plan.graph.groups[static_cast<std::size_t>(t.collective().groups[0])].size();
    if (t.label().find("expert") != std::string::npos) {
      expert = true;
      EXPECT_EQ(size, 4u);  // 16 / 4
      EXPECT_EQ(t.collective().groups.size(), 4u);
    } else {
      dense = true;
      EXPECT_EQ(size, 16u);
    }
  }
  EXPECT_TRUE(dense);
  EXPECT_TRUE(expert);
  // Expert buckets do not queue behind the dense ones (another process group); only the last
  // waits for them, before the optimizer.
  const auto& tasks = r.plan.graph.tasks;
  auto is_dense_bucket = [&](int d) {
    const auto& t = tasks[static_cast<std::size_t>(d)];
    return t.is_collective && t.collective().op == taskgraph::CollectiveOp::AllReduce && t.label().find("expert") == std::string::npos;
  };
  int expert_buckets = 0, waiting = 0;
  for (const auto& t : tasks)
    if (t.is_collective && t.label().find("expert bucket") != std::string::npos) {
      ++expert_buckets;
      waiting += std::any_of(t.deps.begin(), t.deps.end(), is_dense_bucket) ? 1 : 0;
    }
  EXPECT_GT(expert_buckets, 1);
  EXPECT_EQ(waiting, 1);
}

// Expert weights, gradients and optimizer state are split over the expert-parallel GPUs; ZeRO-1
// shards the expert optimizer state over the expert-data-parallel ones.
TEST(ExpertParallelism, ExpertStateDividedByExpertParallelism) {
  test::TempDir dir;
  const auto one = results::memory_only(moe_scenario(dir, 2, R"("data": 16, "expert": 1, "zero_stage": 1)"));
  const auto eight = results::memory_only(moe_scenario(dir, 2, R"("data": 16, "expert": 8, "zero_stage": 1)"));
  const auto s = moe_scenario(dir, 2, R"("data": 16)");
  const auto g = s.model.build(models::BuildOptions{1, 2, models::Attention::Flash});
  double experts = 0;
  for (const auto& l : g.layers) experts += l.expert_params();
  const double dense = g.params() - experts;
  EXPECT_NEAR(one.memory.params, 2.0 * (dense + experts), 1.0);
  EXPECT_NEAR(eight.memory.params, 2.0 * (dense + experts / 8), 1.0);
  EXPECT_NEAR(eight.memory.optimizer, 12.0 * (dense / 16 + experts / 8 / 2), 1.0);
  EXPECT_LT(eight.memory.activations, one.memory.activations * 1.01);
}

// A skewed router gives one expert GPU more tokens; the combine waits for it, and the wait shows
// as straggler wait. The same seed gives the same step; dropless routing only (with a capacity
// factor every expert computes its padded capacity).
TEST(ExpertParallelism, SkewedRouterShowsAsStragglerWait) {
  test::TempDir dir;
  const auto even = results::simulate(moe_scenario(dir, 2, R"("data": 16, "expert": 8)"));
  const auto skew = results::simulate(moe_scenario(dir, 2, R"("data": 16, "expert": 8, "expert_skew": 0.5)"));
  const auto again = results::simulate(moe_scenario(dir, 2, R"("data": 16, "expert": 8, "expert_skew": 0.5)"));
  const auto other = results::simulate(moe_scenario(dir, 2, R"("data": 16, "expert": 8, "expert_skew": 0.5, "expert_seed": 7)"));
  const auto capped =
      results::simulate(moe_scenario(dir, 2, R"("data": 16, "expert": 8, "expert_skew": 0.5)", R"(, "capacity_factor": 1.25)"));
  EXPECT_EQ(even.breakdown.straggler_wait, 0.0);
  EXPECT_GT(skew.breakdown.straggler_wait, 0.0);
  EXPECT_GT(skew.step_time_s, even.step_time_s);
  EXPECT_EQ(skew.step_time_s, again.step_time_s);
  EXPECT_NE(skew.step_time_s, other.step_time_s);
  EXPECT_EQ(capped.breakdown.straggler_wait, 0.0);
  EXPECT_GT(capped.step_time_s, even.step_time_s);  // padding to 1.25x computes more
  EXPECT_NEAR(capped.model_flops, even.model_flops, 1e-9 * even.model_flops);  // but no more model FLOPs
  for (const auto* r : {&even, &skew, &capped}) test::expect_parts_sum_to_step(*r);
}

TEST(ExpertParallelism, ResultReportsActiveParametersAndExpertLayout) {
  test::TempDir dir;
  const auto r = results::simulate(moe_scenario(dir, 2, R"("data": 16, "expert": 8)"));
  const auto j = results::to_json(r, false);
  EXPECT_LT(j["model"]["active_params"].get<double>(), j["model"]["params"].get<double>());
  EXPECT_EQ(j["parallelism"]["expert"].get<int>(), 8);
  EXPECT_EQ(j["parallelism"]["expert_data"].get<int>(), 2);
  EXPECT_GT(j["parallelism"]["all_to_all_share"].get<double>(), 0.0);
  EXPECT_LT(j["parallelism"]["all_to_all_share"].get<double>(), 1.0);
  // MFU counts active parameters' FLOPs: 6 x active (without the embedding lookup) x tokens, and attention.
  const double tokens = 64.0 * 1024;
  EXPECT_GT(r.model_flops, 6.0 * (r.active_params - 1000.0 * 1024) * tokens);
  EXPECT_LT(r.model_flops, 6.0 * r.active_params * tokens * 1.3);
}

TEST(ExpertParallelism, BadSettingsAreInputErrors) {
  test::TempDir dir;
  auto fails = [&](const std::string& parallelism, const std::string& key, int experts = 16) {
    try {
      (void)moe_scenario(dir, 2, parallelism, "", experts);
      ADD_FAILURE() << parallelism << " was accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(e.pointer(), key) << e.what();
    }
  };
  fails(R"("data": 16, "expert": 3)", "/parallelism/expert");        // does not divide the experts
  fails(R"("data": 16, "expert": 32)", "/parallelism/expert");       // more than the data-parallel GPUs
  fails(R"("data": 16, "expert": 4)", "/parallelism/expert", 6);     // 4 does not divide 6 experts
  fails(R"("data": 16, "expert_skew": 0.3)", "/parallelism/expert_skew");
  fails(R"("data": 16, "expert": 8, "bucket_order": "priority")", "/parallelism/bucket_order");
  fails(R"("data": 16, "expert": 8, "recompute": "stage")", "/parallelism/recompute");
}

// Full recomputation re-runs each MoE layer's forward before its backward, all-to-alls included,
// and keeps only the blocks' inputs.
TEST(ExpertParallelism, FullRecomputationRerunsTheAllToAlls) {
  test::TempDir dir;
  const auto plain = results::simulate(moe_scenario(dir, 2, R"("data": 16, "expert": 8)"));
  const auto full = results::simulate(moe_scenario(dir, 2, R"("data": 16, "expert": 8, "recompute": "full")"));
  EXPECT_EQ(all_to_alls(full.plan.graph).size(), all_to_alls(plain.plan.graph).size() / 4 * 6);
  EXPECT_LT(full.memory.activations, plain.memory.activations / 2);
  EXPECT_GT(full.hardware_flops, plain.hardware_flops * 1.2);
  EXPECT_GT(full.step_time_s, plain.step_time_s);
  test::expect_parts_sum_to_step(full);
}

// Tensor parallelism splits the experts' width like a dense MLP's; the router and MLA's
// down-projections run on every tensor rank but count once in the model FLOPs.
TEST(MoeModels, TensorParallelSliceKeepsModelFlops) {
  const auto m = preset("deepseek-v3");
  models::BuildOptions one{1, 2, models::Attention::Flash};
  models::BuildOptions eight = one;
  eight.tensor = 8;
  EXPECT_NEAR(m.build(eight).model_flops() * 8 / m.build(one).model_flops(), 1.0, 1e-9);
  EXPECT_NEAR(m.build(eight).params() * 8 / m.build(one).params(), 1.0, 1e-9);
}
