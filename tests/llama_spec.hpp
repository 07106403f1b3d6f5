#pragma once
// A small Llama-shaped transformer (GQA, SwiGLU, RMSNorm, rotary, no bias, no dropout) for tests
// that build its graph by hand, and the op of a layer they ask about by name.
#include <algorithm>
#include <string>

#include <gtest/gtest.h>

#include "models/model_graph.hpp"

namespace dtsim::test {

inline models::TransformerSpec small_llama(int layers) {
  models::TransformerSpec s;
  s.name = "llama-small";
  s.num_layers = layers;
  s.hidden_size = 1024;
  s.num_heads = 16;
  s.num_kv_heads = 4;
  s.ffn_hidden_size = 2816;
  s.seq_len = 512;
  s.vocab_size = 32000;
  s.mlp = models::Mlp::SwiGlu;
  s.norm = models::Norm::RmsNorm;
  s.linear_bias = false;
  s.position_embedding = models::PositionEmbedding::Rotary;
  s.dropout = false;
  s.tied_embeddings = false;
  return s;
}

// Latent attention at the small model's scale: queries and keys/values through ranks 256 and 128,
// heads of 64 + 32 (rotary) for queries and keys and 64 for values.
inline models::TransformerSpec with_latent_attention(models::TransformerSpec s) {
  s.q_lora_rank = 256, s.kv_lora_rank = 128, s.qk_nope_head_dim = 64, s.qk_rope_head_dim = 32, s.v_head_dim = 64;
  return s;
}

// The small Llama with 8 SwiGLU experts of width 512 (top-2) and `shared` shared experts, and
// latent attention where `mla`.
inline models::TransformerSpec small_moe(int shared, bool mla) {
  auto s = small_llama(2);
  s.num_experts = 8;
  s.experts_per_token = 2;
  s.expert_ffn_hidden_size = 512;
  s.shared_experts = shared;
  return mla ? with_latent_attention(s) : s;
}

// Layer l's op called `name` (a test failure, and the first op, when there is none).
inline const models::Op& op_named(const models::Layer& l, const std::string& name) {
  const auto it = std::find_if(l.ops.begin(), l.ops.end(), [&](const models::Op& o) { return o.name == name; });
  EXPECT_NE(it, l.ops.end()) << name;
  return it != l.ops.end() ? *it : l.ops.front();
}

}  // namespace dtsim::test
