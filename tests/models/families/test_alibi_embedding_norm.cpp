// BLOOM's transformer (BigScience 2022, Sec. 3.2.2): ALiBi positions, a bias by distance inside
// the attention kernel with no table to learn and no rotation to run, and a LayerNorm of the
// embedding's output before the first block.
#include <gtest/gtest.h>

#include "llama_spec.hpp"
#include "models/model_graph.hpp"
#include "scenario_helpers.hpp"

using namespace dtsim;
using test::op_named;

namespace {

models::ModelGraph build(const models::TransformerSpec& s, std::int64_t tensor = 1) {
  return models::build_transformer(s, models::BuildOptions{2, 2, models::Attention::Flash, tensor, tensor > 1});
}

const models::Layer& embedding(const models::ModelGraph& g) { return g.layers.front(); }

}  // namespace

TEST(AlibiAndEmbeddingNorm, AlibiHasNoTableAndNoRotaryCopies) {
  auto s = test::small_llama(2);
  s.position_embedding = models::PositionEmbedding::Learned;
  const auto learned = build(s);
  s.position_embedding = models::PositionEmbedding::Alibi;
  const auto alibi = build(s);
  // The learned table of seq_len x hidden is gone; nothing else is.
  EXPECT_DOUBLE_EQ(learned.params() - alibi.params(), static_cast<double>(s.seq_len * s.hidden_size));
  EXPECT_DOUBLE_EQ(learned.model_flops(), alibi.model_flops());
  // The attention call reads no rotary table (torchtitan's copies around it price none).
  const auto& fa = op_named(alibi.layers[1], "flash_attention").forward.front();
  EXPECT_EQ(fa.io.rope_table, 0.0);
}

TEST(AlibiAndEmbeddingNorm, TheEmbeddingsNormIsOneLayerNormOfItsOutput) {
  auto s = test::small_llama(2);
  s.norm = models::Norm::LayerNorm;
  const auto without = build(s);
  s.embedding_norm = true;
  const auto with = build(s);
  const auto& n = op_named(embedding(with), "embedding.norm");
  // A weight and a bias of hidden, and the blocks' own norm kernels, over the embedding's output.
  EXPECT_DOUBLE_EQ(with.params() - without.params(), 2.0 * static_cast<double>(s.hidden_size));
  const auto& block_norm = op_named(with.layers[1], "norm1");
  ASSERT_EQ(n.forward.size(), block_norm.forward.size());
  EXPECT_EQ(n.forward.front().role, block_norm.forward.front().role);
  EXPECT_DOUBLE_EQ(n.forward.front().bytes, block_norm.forward.front().bytes);
  // Under tensor parallelism every rank holds it: counted once across the group.
  const auto split = build(s, 4);
  EXPECT_DOUBLE_EQ(op_named(embedding(split), "embedding.norm").params, 2.0 * static_cast<double>(s.hidden_size) / 4);
}

TEST(AlibiAndEmbeddingNorm, BloomPresetHasItsPublishedParameterCount) {
  const auto spec = *config::load_model_preset("bloom-176b").transformer();
  EXPECT_EQ(spec.position_embedding, models::PositionEmbedding::Alibi);
  EXPECT_TRUE(spec.embedding_norm);
  // The model card: 176,247,271,424 parameters.
  EXPECT_NEAR(build(spec).params() / 176247271424.0, 1.0, 0.0001);
}
