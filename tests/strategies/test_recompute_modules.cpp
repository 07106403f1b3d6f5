// Megatron-Core's fine-grained recomputation (--recompute-granularity selective
// --recompute-modules): which ops backward runs again and what each keeps, by hand; and a step's
// memory and compute against the same step without recomputation.
#include <gtest/gtest.h>

#include "models/model_graph.hpp"
#include "llama_spec.hpp"
#include "scenario_helpers.hpp"
#include "strategies/recompute.hpp"

using namespace dtsim;
using test::op_named;
using test::small_llama;
namespace rm = models::recompute_module;

namespace {

models::Layer block(const models::TransformerSpec& s, std::uint8_t modules, models::Attention a = models::Attention::Flash) {
  models::BuildOptions o{2, 2, a};
  o.recompute_modules = modules;
  return models::build_transformer(s, o).layers[1];
}

double kept_selective(const models::Layer& l) {
  double b = 0;
  for (const auto& op : l.ops) b += op.saved_bytes_selective;
  return b;
}

}  // namespace

TEST(RecomputeModules, LayernormRerunsTheNormsAndDropsTheirOutputs) {
  const auto l = block(small_llama(2), rm::kGiven | rm::kLayernorm);
  EXPECT_TRUE(op_named(l, "norm1").selective);
  EXPECT_TRUE(op_named(l, "norm2").selective);
  // The projections that saved the normed input keep nothing: 2 x 512 tokens x 1,024 x 2 bytes each.
  const double normed = 2.0 * 512 * 1024 * 2;
  EXPECT_DOUBLE_EQ(op_named(l, "qkv").saved_bytes, normed);
  EXPECT_DOUBLE_EQ(op_named(l, "qkv").saved_bytes_selective, 0.0);
  EXPECT_DOUBLE_EQ(op_named(l, "mlp.gate_up").saved_bytes_selective, 0.0);
  EXPECT_DOUBLE_EQ(l.saved_bytes() - kept_selective(l), 2.0 * normed);
  // Without core_attn nothing of the attention runs again.
  EXPECT_FALSE(op_named(l, "flash_attention").selective);
  const auto again = strategies::reruns(l, strategies::Recompute::Selective);
  std::size_t rerun = 0;
  for (const auto& r : again) rerun += r.whole;
  EXPECT_EQ(rerun, 2u);
}

TEST(RecomputeModules, CoreAttnCheckpointsAFusedAttentionKeepingQKV) {
  const auto s = small_llama(2);
  const auto l = block(s, rm::kGiven | rm::kCoreAttn);
  const auto& fa = op_named(l, "flash_attention");
  EXPECT_TRUE(fa.selective);
  // Q of 16 heads and K, V of 4, each 64 wide, over 2 x 512 tokens in 2 bytes; O and the
  // log-sum-exp are not kept.
  EXPECT_DOUBLE_EQ(fa.saved_bytes_selective, 2.0 * 512 * (16 + 2 * 4) * 64 * 2);
  EXPECT_LT(fa.saved_bytes_selective, fa.saved_bytes);
  // Under standard attention core_attn is Korthikanti's selective recompute, flag for flag.
  const auto named = block(s, rm::kGiven | rm::kCoreAttn, models::Attention::Standard);
  const auto plain = block(s, 0, models::Attention::Standard);
  EXPECT_TRUE(named == plain);
}

TEST(RecomputeModules, NoModulesRecomputeNothing) {
  const auto s = small_llama(2);
  for (auto a : {models::Attention::Flash, models::Attention::Standard}) {
    const auto l = block(s, rm::kGiven, a);
    EXPECT_DOUBLE_EQ(kept_selective(l), l.saved_bytes());
    for (const auto& op : l.ops) EXPECT_FALSE(op.selective) << op.name;
  }
}

TEST(RecomputeModules, MoeActRerunsTheExpertsActivation) {
  auto s = small_llama(2);
  s.num_experts = 8;
  s.experts_per_token = 2;
  s.expert_ffn_hidden_size = 512;
  const auto l = block(s, rm::kGiven | rm::kMoeAct);
  const auto& act = op_named(l, "moe.experts.swiglu");
  const auto& down = op_named(l, "moe.experts.down");
  EXPECT_TRUE(act.selective);
  EXPECT_DOUBLE_EQ(act.saved_bytes_selective, act.saved_bytes);  // it keeps its own input
  EXPECT_GT(down.saved_bytes, 0.0);
  EXPECT_DOUBLE_EQ(down.saved_bytes_selective, 0.0);
  EXPECT_DOUBLE_EQ(l.saved_bytes() - kept_selective(l), down.saved_bytes);
}

// One GPU, one micro-batch: the step under layernorm and core_attn keeps exactly the normed inputs
// and the attention outputs fewer (but one block's, rebuilt in backward), and runs the norms and
// the attention forward once more.
TEST(RecomputeModules, AStepKeepsLessAndRunsMore) {
  auto run = [](const std::string& recompute) { return test::small_llama_step(R"("data": 8, "micro_batch_size": 1, )" + recompute, 8); };
  const auto none = run(R"("recompute": "none")");
  const auto modules = run(R"("recompute": "selective", "recompute_modules": ["layernorm", "core_attn"])");
  // Per block: two normed inputs (2,048 x 1,024 x 2 bytes) and the attention's output and
  // log-sum-exp (2,048 x 1,024 x 2 + 16 heads x 2,048 x 4 bytes); backward rebuilds one block's.
  const double per_block = 2 * 2048.0 * 1024 * 2 + 2048.0 * 1024 * 2 + 16 * 2048.0 * 4;
  EXPECT_NEAR(none.memory.activations - modules.memory.activations, 3 * per_block, 1.0);
  EXPECT_GT(modules.breakdown.compute, none.breakdown.compute);
  EXPECT_GT(modules.hardware_flops, none.hardware_flops);
  EXPECT_DOUBLE_EQ(modules.model_flops, none.model_flops);
}

TEST(RecomputeModules, BadListsAreRefusedWithTheReason) {
  auto error = [](const std::string& parallelism) {
    return test::input_error_over_base(R"({"extends": "base.json", "parallelism": {"data": 8, "micro_batch_size": 4, )" +
                                       parallelism + "}}");
  };
  EXPECT_NE(error(R"("recompute_modules": ["layernorm"])").find("did you mean \"recompute\": \"selective\""), std::string::npos);
  EXPECT_NE(error(R"("recompute": "selective", "recompute_modules": ["layernrom"])").find("did you mean"), std::string::npos);
  EXPECT_NE(error(R"("recompute": "selective", "recompute_modules": ["moe"])").find("no experts (did you mean \"mlp\"?)"), std::string::npos);
  EXPECT_NE(error(R"("recompute": "selective", "recompute_modules": ["mla_up_proj"])").find("no latent attention"), std::string::npos);
  EXPECT_NE(error(R"("recompute": "selective", "recompute_modules": ["shared_experts"])").find("has none"), std::string::npos);
  EXPECT_EQ(error(R"("recompute": "selective", "recompute_modules": ["mlp"])"), "");
  EXPECT_NE(error(R"("recompute": "selective", "recompute_modules": ["moe_act"])").find("no experts"), std::string::npos);
  EXPECT_NE(error(R"("recompute": "selective", "recompute_modules": "core_attn")").find("/parallelism/recompute_modules"), std::string::npos);
  EXPECT_EQ(error(R"("recompute": "selective", "recompute_modules": ["core_attn", "layernorm"])"), "");
}
