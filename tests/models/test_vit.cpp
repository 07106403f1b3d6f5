// Vision transformers: parameter counts against Dosovitskiy et al. 2021 and the patch embedding.
#include <gtest/gtest.h>

#include "models/model.hpp"
#include "sim/config/scenario.hpp"

using namespace dtsim;

TEST(Vit, ParameterCountsMatchDosovitskiyTable1) {
  // Dosovitskiy et al. 2021, Table 1: ViT-Base 86M, ViT-Large 307M, ViT-Huge 632M.
  const std::pair<const char*, double> table1[] = {{"vit-b-16", 86e6}, {"vit-l-16", 307e6}, {"vit-h-14", 632e6}};
  for (const auto& [name, count] : table1)
    EXPECT_NEAR(config::load_model_preset(name).build({}).params() / count, 1.0, 0.01) << name;
}

TEST(Vit, CountsEveryParameterOnce) {
  // ViT-B/16 at 224 x 224: 12 blocks of 12D^2 + 13D, a 16x16x3 -> D patch convolution with bias,
  // the class token, 197 position embeddings, the final LayerNorm and a 1000-way classifier:
  // 86,567,656, as timm's vit_base_patch16_224 counts it.
  const double d = 768;
  const double expected = 12 * (12 * d * d + 13 * d) + (16 * 16 * 3 * d + d) + d + 197 * d + 2 * d + (d * 1000 + 1000);
  EXPECT_DOUBLE_EQ(expected, 86567656.0);
  EXPECT_DOUBLE_EQ(config::load_model_preset("vit-b-16").build({}).params(), expected);
}

TEST(Vit, PatchesAreEmbeddedByAConvolutionAndJoinedByTheClassToken) {
  const auto m = config::load_model_preset("vit-h-14");
  EXPECT_STREQ(m.kind(), "vit");
  EXPECT_EQ(m.tokens_per_sample(), 16 * 16 + 1);  // 224 / 14 = 16 patches a side, and the class token
  const auto g = m.build({2, 2});
  const auto& conv = g.layers.front().ops.front().forward.front();
  EXPECT_EQ(conv.kind, models::KernelKind::Conv);
  EXPECT_EQ(conv.m, 2 * 256);       // N * P * Q
  EXPECT_EQ(conv.n, 1280);          // D filters
  EXPECT_EQ(conv.k, 3 * 14 * 14);   // C * R * S
  // Attention is bidirectional over all 257 tokens: QK^T is 257 x 257 per head.
  for (const auto& op : g.layers[1].ops)
    if (op.name == "attention.scores") {
      EXPECT_EQ(op.forward.front().m, 257);
      EXPECT_EQ(op.forward.front().n, 257);
    }
  // The classifier reads the class token alone.
  const auto& head = g.layers.back();
  ASSERT_EQ(head.ops[1].name, "classifier");
  EXPECT_EQ(head.ops[1].forward.front().m, 2);
  EXPECT_EQ(head.ops[1].forward.front().n, 1000);
}
