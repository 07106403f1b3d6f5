#include "models/model.hpp"

#include <fmt/format.h>

namespace dtsim::models {

namespace {
template <class... F>
struct Overload : F... {
  using F::operator()...;
};
// clang 14 (the fuzz build's compiler) does not deduce an aggregate's template arguments yet.
template <class... F>
Overload(F...) -> Overload<F...>;

// AlexNet's channel split (Krizhevsky et al. 2012): each rank computes 1/t of every convolution's
// and fully connected layer's outputs, and a grouped convolution 1/t of its groups.
std::string cnn_channel_split_error(const CnnSpec& m, std::int64_t t) {
  for (const auto& op : m.ops) {
    if (op.kind != CnnOpKind::Conv && op.kind != CnnOpKind::Fc) continue;
    if (op.filters % t != 0)
      return fmt::format("{} does not divide the {} outputs of {} (tensor parallelism splits a CNN's channels)", t, op.filters, op.name);
    if (op.groups > 1 && op.groups % t != 0)
      return fmt::format("{} does not divide the {} groups of {} (tensor parallelism splits a CNN's channels)", t, op.groups, op.name);
  }
  return "";
}
}  // namespace

const char* ModelSpec::kind() const {
  return std::visit(Overload{[](const TransformerSpec& s) { return s.vision() ? "vit" : "transformer"; }, [](const CnnSpec&) { return "cnn"; }}, family);
}

ModelGraph ModelSpec::build(const BuildOptions& o) const {
  return std::visit(Overload{[&](const TransformerSpec& s) { return build_transformer(s, o); },
                             [&](const CnnSpec& s) { return build_cnn(s, o); }},
                    family);
}

std::int64_t ModelSpec::blocks() const {
  return std::visit(Overload{[](const TransformerSpec& s) { return s.num_layers; },
                             [](const CnnSpec& s) { return static_cast<std::int64_t>(s.layers.size()); }},
                    family);
}

std::string ModelSpec::blocks_key() const {
  return std::visit(Overload{[](const TransformerSpec&) { return std::string("model.num_layers"); },
                             [](const CnnSpec&) { return std::string("the model's layers"); }},
                    family);
}

std::int64_t ModelSpec::tokens_per_sample() const {
  return std::visit(Overload{[](const TransformerSpec& s) { return s.seq_len; }, [](const CnnSpec&) { return std::int64_t{0}; }},
                    family);
}

std::string ModelSpec::tensor_split_error(std::int64_t t) const {
  return std::visit(Overload{[&](const TransformerSpec& m) -> std::string {
                      // Megatron splits heads, KV heads (or replicates them) and the FFN width.
                      if (m.num_heads % t != 0) return fmt::format("{} does not divide model.num_heads ({})", t, m.num_heads);
                      if (m.num_kv_heads % t != 0 && t % m.num_kv_heads != 0)
                        return fmt::format("{} and model.num_kv_heads ({}) must divide one another", t, m.num_kv_heads);
                      if (m.ffn_hidden_size % t != 0)
                        return fmt::format("{} does not divide model.ffn_hidden_size ({})", t, m.ffn_hidden_size);
                      if (m.moe() && m.expert_ffn_hidden_size % t != 0)
                        return fmt::format("{} does not divide model.expert_ffn_hidden_size ({})", t, m.expert_ffn_hidden_size);
                      return "";
                    },
                             [&](const CnnSpec& m) { return cnn_channel_split_error(m, t); }},
                    family);
}

std::string ModelSpec::context_split_error(std::int64_t c) const {
  if (c == 1) return "";
  const auto* t = std::get_if<TransformerSpec>(&family);
  if (!t || t->vision())
    return fmt::format("context parallelism splits a language model's token sequence; model.kind \"{}\" has none", kind());
  // Load balancing cuts the sequence into 2c chunks (Megatron-Core's get_batch_on_this_cp_rank).
  if (t->seq_len % (2 * c) != 0)
    return fmt::format("2 x {} = {} chunks do not divide model.seq_len ({})", c, 2 * c, t->seq_len);
  return "";
}

std::string ModelSpec::expert_split_error(std::int64_t ep) const {
  if (ep == 1) return "";
  const auto* m = std::get_if<TransformerSpec>(&family);
  if (!m || !m->moe())
    return fmt::format("{}-way expert parallelism needs a mixture-of-experts model (model.num_experts)", ep);
  if (m->num_experts % ep != 0) return fmt::format("{} does not divide model.num_experts ({})", ep, m->num_experts);
  return "";
}

std::vector<std::pair<std::string, std::int64_t>> ModelSpec::sizes() const {
  return std::visit(Overload{[](const TransformerSpec& s) {
                      if (s.vision())
                        return std::vector<std::pair<std::string, std::int64_t>>{
                            {"layers", s.num_layers}, {"seq_len", s.seq_len}, {"image_size", s.image_size},
                            {"patch_size", s.patch_size}, {"classes", s.classes}};
                      if (s.moe())
                        return std::vector<std::pair<std::string, std::int64_t>>{
                            {"layers", s.num_layers}, {"seq_len", s.seq_len}, {"experts", s.num_experts},
                            {"experts_per_token", s.experts_per_token}};
                      return std::vector<std::pair<std::string, std::int64_t>>{{"layers", s.num_layers}, {"seq_len", s.seq_len}};
                    },
                             [](const CnnSpec& s) {
                               return std::vector<std::pair<std::string, std::int64_t>>{
                                   {"layers", static_cast<std::int64_t>(s.layers.size())}, {"image_size", s.image_size}, {"classes", s.classes}};
                             }},
                    family);
}

}  // namespace dtsim::models
