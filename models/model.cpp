#include "models/model.hpp"

#include <fmt/format.h>

namespace dtsim::models {

namespace {
template <class... F>
struct Overload : F... {
  using F::operator()...;
};
}  // namespace

const char* ModelSpec::kind() const {
  return std::visit(Overload{[](const TransformerSpec&) { return "transformer"; }}, family);
}

ModelGraph ModelSpec::build(const BuildOptions& o) const {
  return std::visit(Overload{[&](const TransformerSpec& s) { return build_transformer(s, o); }}, family);
}

std::int64_t ModelSpec::blocks() const {
  return std::visit(Overload{[](const TransformerSpec& s) { return s.num_layers; }}, family);
}

std::string ModelSpec::blocks_key() const {
  return std::visit(Overload{[](const TransformerSpec&) { return std::string("model.num_layers"); }}, family);
}

std::int64_t ModelSpec::tokens_per_sample() const {
  return std::visit(Overload{[](const TransformerSpec& s) { return s.seq_len; }}, family);
}

std::string ModelSpec::tensor_split_error(std::int64_t t) const {
  return std::visit(Overload{[&](const TransformerSpec& m) -> std::string {
                      // Megatron splits heads, KV heads (or replicates them) and the FFN width.
                      if (m.num_heads % t != 0) return fmt::format("{} does not divide model.num_heads ({})", t, m.num_heads);
                      if (m.num_kv_heads % t != 0 && t % m.num_kv_heads != 0)
                        return fmt::format("{} and model.num_kv_heads ({}) must divide one another", t, m.num_kv_heads);
                      if (m.ffn_hidden_size % t != 0)
                        return fmt::format("{} does not divide model.ffn_hidden_size ({})", t, m.ffn_hidden_size);
                      return "";
                    }},
                    family);
}

std::vector<std::pair<std::string, std::int64_t>> ModelSpec::sizes() const {
  return std::visit(Overload{[](const TransformerSpec& s) {
                      return std::vector<std::pair<std::string, std::int64_t>>{{"layers", s.num_layers}, {"seq_len", s.seq_len}};
                    }},
                    family);
}

}  // namespace dtsim::models
