// Expert parallelism beside context parallelism (Megatron-Core's parallel folding: the expert grid
// of expert_tensor x expert x expert-data ranks over the dense tensor x context x data ranks,
// parallel_state.py's expert order tp-ep-dp over tp-cp-dp): the all-to-all groups take context
// ranks, the experts' gradients are summed over the context x data ranks that hold them, an MoE
// layer's attention passes K and V around the context ring beside it, and latent attention
// splits its queries as standard attention does.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "helpers.hpp"
#include "llama_spec.hpp"
#include "models/model_graph.hpp"
#include "moe_scenario.hpp"
#include "scenario_helpers.hpp"
#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "sim/results/result.hpp"

using namespace dtsim;
using taskgraph::CollectiveOp;

namespace {

// The small MoE model (16 experts, top-2) at 4,096 tokens on two DGX H100 nodes, `parallelism` merged.
config::Scenario moe(const test::TempDir& dir, const std::string& parallelism) {
  auto s = test::moe_scenario(dir, 2, R"("micro_batch_size": 1, )" + parallelism);
  return s;
}

std::vector<std::vector<int>> groups_of(const results::Result& r, CollectiveOp op, const std::string& label) {
  std::vector<std::vector<int>> out;
  for (const auto& t : r.plan.graph.tasks)
    if (t.is_collective && t.collective().op == op && t.label().find(label) != std::string::npos)
      for (int g : t.collective().groups) out.push_back(r.plan.graph.groups[static_cast<std::size_t>(g)]);
  return out;
}

}  // namespace

// Context 2 x data 8 on 16 GPUs, expert 8: an expert-parallel group is 8 consecutive context and
// data ranks (GPUs 0-7, one node: context ranks sit right after tensor ranks), and the experts'
// gradients are summed over the 2 ranks holding the same experts (GPU g and g + 8).
TEST(MoeContext, ExpertGroupsFoldOverContextRanks) {
  test::TempDir dir;
  const auto s = moe(dir, R"("data": 8, "context": 2, "expert": 8, "zero_stage": 1)");
  EXPECT_EQ(s.parallelism.expert_data(), 2);
  const auto r = results::simulate(s);
  test::expect_parts_sum_to_step(r);
  const auto a2a = groups_of(r, CollectiveOp::AllToAll, "dispatch");
  ASSERT_FALSE(a2a.empty());
  std::set<std::vector<int>> distinct(a2a.begin(), a2a.end());
  for (const auto& g : distinct) {
    std::vector<int> sorted = g;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted.back() - sorted.front(), 7);  // consecutive: one node
  }
  const auto buckets = groups_of(r, CollectiveOp::ReduceScatter, "expert bucket");
  ASSERT_FALSE(buckets.empty());
  for (const auto& g : buckets) {
    ASSERT_EQ(g.size(), 2u);
    EXPECT_EQ(std::abs(g[1] - g[0]), 8);
  }
}

// Each MoE layer's attention passes K and V around the context ring beside its attention kernel,
// forward once and backward with their gradients (twice the bytes), as a dense layer's does.
TEST(MoeContext, TheAttentionPieceCarriesTheRing) {
  test::TempDir dir;
  const auto r = results::simulate(moe(dir, R"("data": 8, "context": 2, "expert": 8)"));
  int pieces = 0;
  for (const auto& w : r.plan.graph.works) {
    const bool forward = w.name.rfind("fwd", 0) == 0 && w.name.find("before dispatch") != std::string::npos;
    const bool backward = w.name.rfind("bwd", 0) == 0 && w.name.find("after dispatch") != std::string::npos;
    if (!forward && !backward) continue;
    ++pieces;
    const auto ring = std::find_if(w.comms.begin(), w.comms.end(), [](const auto& c) { return c.op == CollectiveOp::SendRecv; });
    ASSERT_NE(ring, w.comms.end()) << w.name;
    EXPECT_GE(ring->hidden_by, 0) << w.name;
    EXPECT_EQ(ring->count, 1);  // context - 1 steps
    EXPECT_EQ(w.kernels[static_cast<std::size_t>(ring->hidden_by)].role,
              forward ? models::KernelRole::FlashForward : models::KernelRole::FlashBackward);
  }
  EXPECT_GE(pieces, 2);  // blocks alike share their works
}

// Against data 16 on the same GPUs and tokens: half the tokens per GPU, so half the activations
// of the blocks and the same expert work per token; the ring adds communication.
TEST(MoeContext, HalvesTheActivationsPerGpu) {
  test::TempDir dir;
  const auto cp = results::simulate(moe(dir, R"("data": 8, "context": 2, "expert": 8)"));
  const auto dp = results::simulate(moe(dir, R"("data": 16, "expert": 8)"));
  EXPECT_LT(cp.memory.activations, 0.6 * dp.memory.activations);
  EXPECT_NEAR(cp.model_flops, dp.model_flops, 1e-6 * dp.model_flops);
}

// The grid's own rule: the expert-parallel groups come out of the context x data ranks.
TEST(MoeContext, TheGridMustDivideContextTimesData) {
  test::TempDir dir;
  try {
    test::moe_scenario(dir, 2, R"("micro_batch_size": 1, "data": 8, "context": 2, "expert": 32)", "", 32);
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("32 does not divide context x data (16)"), std::string::npos) << e.what();
  }
}

// Latent attention under context parallelism: this rank's queries (a quarter of 512 over 4
// ranks) attend over all 512 keys, and K (as wide as Q) and V go around the ring.
TEST(MoeContext, LatentAttentionSplitsItsQueries) {
  const auto s = test::with_latent_attention(test::small_llama(2));
  models::BuildOptions o{1, 2, models::Attention::Flash};
  o.context = 4;
  const auto l = models::build_transformer(s, o).layers[1];
  const auto& fa = test::op_named(l, "flash_attention");
  EXPECT_TRUE(fa.context_attention);
  EXPECT_EQ(fa.forward.front().m, 128);
  EXPECT_EQ(fa.forward.front().n, 512);
  EXPECT_DOUBLE_EQ(l.context_kv_bytes, 128.0 * 16 * (96 + 64) * 2);
}
