#pragma once
// A small Llama-shaped transformer (GQA, SwiGLU, RMSNorm, rotary, no bias, no dropout) for tests
// that build its graph by hand.
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

}  // namespace dtsim::test
