// QK-norm (Qwen3's q_norm and k_norm; Megatron-Core --qk-layernorm): every query and key head is
// normalised over its head width after the projection.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "llama_spec.hpp"
#include "models/model_graph.hpp"
#include "scenario_helpers.hpp"
#include "sim/config/import_hf.hpp"

using namespace dtsim;
using test::op_named;

namespace {

models::ModelGraph build(const models::TransformerSpec& s, std::int64_t tensor = 1) {
  return models::build_transformer(s, models::BuildOptions{2, 2, models::Attention::Flash, tensor, tensor > 1});
}

}  // namespace

TEST(QkNorm, OneNormOfEveryQueryAndKeyHeadAfterTheProjection) {
  auto s = test::small_llama(2);  // 16 query heads and 4 key/value heads of 64, RMSNorm
  const auto plain = build(s);
  s.qk_norm = true;
  const auto normed = build(s);
  const auto& block = normed.layers[1];
  // Right after the QKV projection, over rows of one head's 64.
  const auto at = std::find_if(block.ops.begin(), block.ops.end(), [](const models::Op& o) { return o.name == "qkv"; });
  ASSERT_NE(at + 1, block.ops.end());
  EXPECT_EQ((at + 1)->name, "qk_norm");
  const auto& n = op_named(block, "qk_norm");
  EXPECT_EQ(n.forward.front().n, 64);
  EXPECT_EQ(n.forward.front().role, op_named(block, "norm1").forward.front().role);
  // 2 x 512 tokens of (16 + 4) heads of 64, in bf16 read and written as the block's own norm does
  // per element; one RMSNorm weight of 64 each for q and k.
  const double elems = 2.0 * 512 * (16 + 4) * 64, hidden = 2.0 * 512 * 1024;
  EXPECT_DOUBLE_EQ(n.forward.front().bytes / elems, op_named(block, "norm1").forward.front().bytes / hidden);
  EXPECT_DOUBLE_EQ(normed.params() - plain.params(), 2 * (2.0 * 64));
  EXPECT_DOUBLE_EQ(normed.model_flops(), plain.model_flops());
  // Under tensor parallelism each rank normalises its own heads; the weights are replicated.
  const auto split = op_named(build(s, 4).layers[1], "qk_norm");
  EXPECT_DOUBLE_EQ(split.forward.front().bytes, n.forward.front().bytes / 4);
  EXPECT_DOUBLE_EQ(split.params, n.params / 4);
}

TEST(QkNorm, RefusedWhereTheProjectionsAreNotPerHead) {
  const auto error = test::input_error_over_base(R"({"extends": "base.json", "model": {"preset": "deepseek-v3", "qk_norm": true}})");
  EXPECT_NE(error.find("/model/qk_norm"), std::string::npos) << error;
}

TEST(QkNorm, Qwen3ConfigsImportWithIt) {
  const nlohmann::json qwen3 = {{"model_type", "qwen3"}, {"hidden_size", 1024}, {"num_attention_heads", 16}, {"num_key_value_heads", 8},
                                {"head_dim", 128}, {"num_hidden_layers", 2}, {"intermediate_size", 3072},
                                {"max_position_embeddings", 4096}, {"vocab_size", 1000}};
  EXPECT_EQ(config::import_hf_config(qwen3, "q.json").model["qk_norm"], true);
  nlohmann::json llama = qwen3;
  llama["model_type"] = "llama";
  EXPECT_FALSE(config::import_hf_config(llama, "l.json").model.contains("qk_norm"));
}
