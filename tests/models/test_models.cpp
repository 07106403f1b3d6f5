#include <gtest/gtest.h>

#include <algorithm>

#include "models/model_graph.hpp"
#include "sim/cost/eager_kernels.hpp"
#include "sim/config/merge.hpp"
#include "sim/config/scenario.hpp"
#include "helpers.hpp"

using namespace dtsim;

namespace {

// Loads a preset the way a scenario names it.
models::TransformerSpec preset(const std::string& name) {
  test::TempDir dir;
  std::string f = dir.file("s.json", R"({"name": "t", "model": {"preset": ")" + name + R"("},
    "hardware": {"device": "a100-sxm-80gb"},
    "cluster": {"preset": "dgx-a100", "nodes": 1},
    "parallelism": {"data": 8}, "training": {"global_batch_size": 8}})");
  return *config::load_scenario(f).model.transformer();
}

models::ModelGraph build(const models::TransformerSpec& s, std::int64_t b = 1) {
  return models::build_transformer(s, models::BuildOptions{b, 2, models::Attention::Standard});
}

}  // namespace

TEST(Models, Gpt3ParameterCountMatchesMegatronEq2) {
  auto spec = preset("gpt3-175b");
  double params = build(spec).params();
  // Narayanan et al. 2021 (SC21), Eq. 2 with l = 96, h = 12288: 174.6 B parameters.
  EXPECT_NEAR(params / 174.6e9, 1.0, 0.005);
  // The op graph counts exactly Eq. 2's terms plus the final layer norm (2h).
  EXPECT_NEAR(params, models::megatron_eq2_params(spec) + 2.0 * spec.hidden_size, 1.0);
}

// build_transformer builds each run of like blocks once and copies it: every block equals one
// built on its own at its index (the first of a model that size), its name apart. DeepSeek-V3's
// first three blocks are dense, the rest MoE, with multi-head latent attention.
TEST(Models, CopiedBlocksEqualBlocksBuiltOnTheirOwn) {
  for (const char* name : {"gpt3-175b", "deepseek-v3"}) {
    auto spec = preset(name);
    spec.num_layers = 5;
    const auto g = build(spec);
    for (std::int64_t i = 0; i < spec.num_layers; ++i) {
      auto alone = spec;
      alone.num_layers = 1;
      // Block 0 of a one-block model, dense or MoE as block i is.
      alone.first_dense_layers = spec.moe_block(i) ? 0 : 1;
      auto fresh = build(alone).layers[1];
      const auto& copied = g.layers[static_cast<std::size_t>(i) + 1];
      EXPECT_EQ(copied.name, "block." + std::to_string(i));
      fresh.name = copied.name;
      EXPECT_TRUE(fresh == copied) << name << " block " << i;
    }
  }
}

TEST(Models, LlamaParameterCountsMatchPublishedSizes) {
  // Meta's model cards: Llama 3 8B has 8.03 B parameters, 70B has 70.6 B.
  EXPECT_NEAR(build(preset("llama-3-8b")).params() / 8.03e9, 1.0, 0.01);
  EXPECT_NEAR(build(preset("llama-3-70b")).params() / 70.6e9, 1.0, 0.01);
}

TEST(Models, Nemotron4ParameterCountMatchesItsReport) {
  // Parmar et al. 2024, Sec. 2: 3.2 B embedding (input and output, untied) and 12.5 B other parameters.
  const auto g = build(preset("nemotron-4-15b"));
  const double embedding = g.layers.front().params() + g.layers.back().params();
  EXPECT_NEAR(embedding / 3.2e9, 1.0, 0.02);
  EXPECT_NEAR((g.params() - embedding) / 12.5e9, 1.0, 0.01);
}

TEST(Models, Gpt2ParameterCount) {
  // GPT-2 small: 124.4 M with tied embeddings (Radford et al. 2019 report "117M" for an older count).
  EXPECT_NEAR(build(preset("gpt2")).params() / 124.44e6, 1.0, 0.002);
}

TEST(Models, ActivationBytesPerLayerMatchKorthikanti) {
  auto spec = preset("gpt3-175b");
  for (std::int64_t b : {1, 4}) {
    auto g = build(spec, b);
    const auto& block = g.layers[1];
    ASSERT_EQ(block.kind, models::LayerKind::Block);
    // Korthikanti et al. 2022, Eq. 1: s*b*h*(34 + 5*a*s/h) bytes per layer in 16-bit.
    EXPECT_DOUBLE_EQ(block.saved_bytes(), models::korthikanti_layer_activation_bytes(spec, b));
  }
}

TEST(Models, SelectiveRecomputeDropsExactlyTheAttentionScores) {
  auto spec = preset("gpt3-175b");
  auto g = build(spec, 2);
  double kept = 0;
  for (const auto& op : g.layers[1].ops) kept += op.saved_bytes_selective;
  double sbh = 2.0 * spec.seq_len * spec.hidden_size;
  EXPECT_DOUBLE_EQ(kept, 34.0 * sbh);  // Korthikanti Sec. 5: selective recompute leaves 34sbh
}

TEST(Models, ModelFlopsMatchKorthikantiFormula) {
  auto spec = preset("gpt3-175b");
  const double b = 2, s = static_cast<double>(spec.seq_len), h = static_cast<double>(spec.hidden_size),
               l = static_cast<double>(spec.num_layers), v = static_cast<double>(spec.vocab_size);
  // Korthikanti et al. 2022, Sec. 6.3 (no recomputation): 72 b s l h^2 (1 + s/(6h) + V/(12 h l)).
  double expected = 72.0 * b * s * l * h * h * (1.0 + s / (6.0 * h) + v / (12.0 * h * l));
  EXPECT_NEAR(build(spec, 2).model_flops() / expected, 1.0, 1e-12);
}

TEST(Models, GroupedQueryAttentionShrinksKeyValueProjections) {
  auto spec = preset("llama-3-8b");
  auto g = build(spec);
  const auto& qkv = g.layers[1].ops[1];
  ASSERT_EQ(qkv.name, "qkv");
  // 32 query heads and 8 KV heads of 128: h x (4096 + 2 x 1024), no bias.
  EXPECT_DOUBLE_EQ(qkv.params, 4096.0 * (4096 + 2 * 1024));
}

TEST(Models, FlashAttentionKeepsNoScoreMatrix) {
  auto spec = preset("gpt2");
  auto standard = build(spec, 8);
  auto flash = models::build_transformer(spec, models::BuildOptions{8, 2, models::Attention::Flash});
  double scores = 5.0 * spec.num_heads * spec.seq_len * spec.seq_len * 8;
  EXPECT_GT(standard.layers[1].saved_bytes() - flash.layers[1].saved_bytes(), 0.9 * scores);
  EXPECT_DOUBLE_EQ(standard.model_flops(), flash.model_flops());
}

TEST(Models, TensorAndSequenceParallelActivationsMatchKorthikantiTable2) {
  auto spec = preset("gpt3-175b");
  for (std::int64_t t : {2, 8})
    for (bool sp : {false, true}) {
      auto g = models::build_transformer(spec, models::BuildOptions{1, 2, models::Attention::Standard, t, sp});
      EXPECT_NEAR(g.layers[1].saved_bytes() / models::korthikanti_layer_activation_bytes(spec, 1, t, sp), 1.0, 1e-12)
          << "t=" << t << " sp=" << sp;
    }
}

TEST(OptimizerStep, PassesOverTheParametersFollowTheMixedPrecisionRecipe) {
  using models::OptimizerKind;
  using models::UpdatePath;
  // Adam in fp32: read gradient, weight, m, v and write the last three (28), plus the
  // gradient-norm read for clipping (4). Master weights add the 16-bit weight copy (read 4,
  // write 2); fp16 adds the gradient copy to fp32 (read 2, write 4) and the unscale (read and
  // write 4): Megatron-LM's Float16Optimizer.step makes exactly these passes.
  EXPECT_DOUBLE_EQ(models::optimizer_kernel(OptimizerKind::Adam, 1e9, UpdatePath::Fp32).bytes, 32e9);
  EXPECT_DOUBLE_EQ(models::optimizer_kernel(OptimizerKind::Adam, 1e9, UpdatePath::Bf16Master).bytes, 38e9);
  EXPECT_DOUBLE_EQ(models::optimizer_kernel(OptimizerKind::Adam, 1e9, UpdatePath::Fp16Master).bytes, 52e9);
  EXPECT_DOUBLE_EQ(models::optimizer_kernel(OptimizerKind::Sgd, 1e9, UpdatePath::Fp32).bytes, 24e9);
}

// Squared ReLU (Nemotron-4, Megatron-LM --squared-relu, TE activation "srelu"): the GELU block's
// two matrices around y = relu(x)^2 over tokens x ffn. By hand for t = 2 x 256 tokens, ffn 1024,
// bf16: one fused kernel each way, forward 2 t ffn bytes x 2 and 2 FLOPs a value, backward 3 x 2
// bytes and 3 FLOPs a value, the input kept; eager PyTorch runs relu then pow forward, and
// pow_backward's copy, scale and multiply then relu's threshold_backward.
TEST(Models, SquaredReluMlpByHand) {
  models::TransformerSpec s;
  s.name = "srelu";
  s.num_layers = 1;
  s.hidden_size = 256;
  s.num_heads = 4;
  s.num_kv_heads = 4;
  s.ffn_hidden_size = 1024;
  s.seq_len = 256;
  s.vocab_size = 1000;
  const auto gelu = models::build_transformer(s, {2, 2});
  s.mlp = models::Mlp::SquaredRelu;
  const auto srelu = models::build_transformer(s, {2, 2});
  const auto& b = srelu.layers[1];
  const auto act = std::find_if(b.ops.begin(), b.ops.end(), [](const models::Op& o) { return o.name == "mlp.squared_relu"; });
  ASSERT_NE(act, b.ops.end());
  const double n = 2.0 * 256 * 1024, e = 2;
  EXPECT_DOUBLE_EQ(act->forward.at(0).bytes, 2 * n * e);
  EXPECT_DOUBLE_EQ(act->forward.at(0).flops, 2 * n);
  EXPECT_DOUBLE_EQ(act->backward.at(0).bytes, 3 * n * e);
  EXPECT_DOUBLE_EQ(act->backward.at(0).flops, 3 * n);
  EXPECT_DOUBLE_EQ(act->saved_bytes, n * e);
  EXPECT_EQ(srelu.params(), gelu.params());  // two matrices, as GELU's
  EXPECT_EQ(srelu.model_flops(), gelu.model_flops());
  const auto fwd = cost::element_plan(cost::Elementwise::Eager, act->forward.at(0));
  const auto bwd = cost::element_plan(cost::Elementwise::Eager, act->backward.at(0));
  EXPECT_EQ(fwd.passes, (std::vector<double>{2 * n * e, 2 * n * e}));
  EXPECT_EQ(bwd.passes, (std::vector<double>{2 * n * e, 2 * n * e, 3 * n * e, 3 * n * e}));
  EXPECT_TRUE(cost::element_plan(cost::Elementwise::Compiled, act->forward.at(0)).passes.empty());  // Inductor fuses it
}
