#include "sim/config/model_config.hpp"

#include <fmt/format.h>

namespace dtsim::config {

namespace {

models::TransformerSpec parse_transformer(Reader& r, const std::string& name) {
  models::TransformerSpec m;
  m.name = name;
  m.num_layers = r.integer("num_layers", 1, 10000);
  m.hidden_size = r.integer("hidden_size", 1, 1000000);
  m.num_heads = r.integer("num_heads", 1, 100000);
  m.num_kv_heads = r.integer("num_kv_heads", 1, 100000, m.num_heads);
  m.ffn_hidden_size = r.integer("ffn_hidden_size", 1, 10000000, 4 * m.hidden_size);
  m.seq_len = r.integer("seq_len", 1, 10000000);
  m.vocab_size = r.integer("vocab_size", 1, 100000000);
  m.mlp = r.choice("mlp", {"gelu", "swiglu"}, "gelu") == "swiglu" ? models::Mlp::SwiGlu : models::Mlp::Gelu;
  m.tied_embeddings = r.boolean("tied_embeddings", true);
  m.norm = r.choice("norm", {"layernorm", "rmsnorm"}, "layernorm") == "rmsnorm" ? models::Norm::RmsNorm
                                                                                  : models::Norm::LayerNorm;
  m.linear_bias = r.boolean("linear_bias", true);
  m.position_embedding = r.choice("position_embedding", {"learned", "rotary"}, "learned") == "rotary"
                             ? models::PositionEmbedding::Rotary
                             : models::PositionEmbedding::Learned;
  m.dropout = r.boolean("dropout", true);
  r.finish();
  if (m.hidden_size % m.num_heads != 0)
    r.fail("num_heads", fmt::format("{} does not divide model.hidden_size ({})", m.num_heads, m.hidden_size));
  if (m.num_heads % m.num_kv_heads != 0)
    r.fail("num_kv_heads", fmt::format("{} does not divide model.num_heads ({})", m.num_kv_heads, m.num_heads));
  return m;
}

}  // namespace

models::ModelSpec parse_model(Reader r, const std::string& preset) {
  models::ModelSpec spec;
  spec.name = preset.empty() ? "inline" : preset;
  r.choice("kind", {"transformer"});
  spec.family = parse_transformer(r, spec.name);
  return spec;
}

}  // namespace dtsim::config
