// The transformer family: language models, vision transformers (model.kind "vit") and mixtures of
// experts, one TransformerSpec built by build_transformer (models/transformer.cpp).
#include <fmt/format.h>

#include "models/family.hpp"
#include "sim/core/json_reader.hpp"

namespace dtsim::models {

namespace {

class TransformerFamily : public FamilyOf<TransformerSpec> {
 public:
  using FamilyOf::FamilyOf;

  const char* kind() const override { return spec.vision() ? "vit" : "transformer"; }
  ModelGraph build(const BuildOptions& o) const override { return build_transformer(spec, o); }
  std::int64_t blocks() const override { return spec.num_layers; }
  std::string blocks_key() const override { return "model.num_layers"; }
  std::int64_t tokens_per_sample() const override { return spec.seq_len; }

  std::string tensor_split_error(std::int64_t t) const override {
    const TransformerSpec& m = spec;
    // Megatron splits heads, KV heads (or replicates them) and the FFN width.
    if (m.num_heads % t != 0) return fmt::format("{} does not divide model.num_heads ({})", t, m.num_heads);
    if (m.num_kv_heads % t != 0 && t % m.num_kv_heads != 0)
      return fmt::format("{} and model.num_kv_heads ({}) must divide one another", t, m.num_kv_heads);
    if (m.ffn_hidden_size % t != 0) return fmt::format("{} does not divide model.ffn_hidden_size ({})", t, m.ffn_hidden_size);
    if (m.moe() && m.expert_ffn_hidden_size % t != 0)
      return fmt::format("{} does not divide model.expert_ffn_hidden_size ({})", t, m.expert_ffn_hidden_size);
    return "";
  }

  std::string context_split_error(std::int64_t c) const override {
    if (spec.vision()) return Family::context_split_error(c);
    // Load balancing cuts the sequence into 2c chunks (Megatron-Core's get_batch_on_this_cp_rank).
    if (spec.seq_len % (2 * c) != 0) return fmt::format("2 x {} = {} chunks do not divide model.seq_len ({})", c, 2 * c, spec.seq_len);
    return "";
  }

  std::string expert_split_error(std::int64_t ep) const override {
    if (!spec.moe()) return Family::expert_split_error(ep);
    if (spec.num_experts % ep != 0) return fmt::format("{} does not divide model.num_experts ({})", ep, spec.num_experts);
    return "";
  }

  Sizes sizes() const override {
    const TransformerSpec& s = spec;
    if (s.vision())
      return {{"layers", s.num_layers}, {"seq_len", s.seq_len}, {"image_size", s.image_size}, {"patch_size", s.patch_size}, {"classes", s.classes}};
    if (s.moe())
      return {{"layers", s.num_layers}, {"seq_len", s.seq_len}, {"experts", s.num_experts}, {"experts_per_token", s.experts_per_token}};
    return {{"layers", s.num_layers}, {"seq_len", s.seq_len}};
  }
};

// Mixture-of-experts keys: all or none of the first four.
void parse_experts(Reader& r, TransformerSpec& m) {
  if (!r.has("num_experts")) {
    for (const char* key : {"experts_per_token", "expert_ffn_hidden_size", "shared_experts", "first_dense_layers",
                            "capacity_factor", "expert_bias"})
      if (r.has(key)) r.fail(key, "only a mixture-of-experts model (model.num_experts) takes it");
    return;
  }
  m.num_experts = r.integer("num_experts", 1, 100000);
  m.experts_per_token = r.integer("experts_per_token", 1, m.num_experts);
  m.expert_ffn_hidden_size = r.integer("expert_ffn_hidden_size", 1, 10000000);
  m.shared_experts = r.integer("shared_experts", 0, 1000, 0);
  m.first_dense_layers = r.integer("first_dense_layers", 0, m.num_layers - 1, 0);
  m.capacity_factor = r.number("capacity_factor", Range{0.0, 1000.0}, 0.0);
  m.expert_bias = r.boolean("expert_bias", false);
  if (m.capacity_factor > 0 && m.capacity_factor < 1.0)
    r.fail("capacity_factor", "below 1 an expert could not take even its fair share of the tokens (0 is dropless)");
}

// Multi-head latent attention keys: kv_lora_rank turns it on.
void parse_latent_attention(Reader& r, TransformerSpec& m) {
  if (!r.has("kv_lora_rank")) {
    for (const char* key : {"q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"})
      if (r.has(key)) r.fail(key, "only multi-head latent attention (model.kv_lora_rank) takes it");
    return;
  }
  m.kv_lora_rank = r.integer("kv_lora_rank", 1, 1000000);
  m.q_lora_rank = r.integer("q_lora_rank", 0, 1000000, 0);
  m.qk_nope_head_dim = r.integer("qk_nope_head_dim", 1, 100000);
  m.qk_rope_head_dim = r.integer("qk_rope_head_dim", 0, 100000);
  m.v_head_dim = r.integer("v_head_dim", 1, 100000);
}

std::shared_ptr<const Family> parse_transformer(Reader& r, const std::string& name, const std::shared_ptr<const Origins>&) {
  TransformerSpec m;
  m.name = name;
  m.num_layers = r.integer("num_layers", 1, 10000);
  m.hidden_size = r.integer("hidden_size", 1, 1000000);
  m.num_heads = r.integer("num_heads", 1, 100000);
  m.num_kv_heads = r.integer("num_kv_heads", 1, 100000, m.num_heads);
  m.ffn_hidden_size = r.integer("ffn_hidden_size", 1, 10000000, 4 * m.hidden_size);
  m.seq_len = r.integer("seq_len", 1, 10000000);
  m.vocab_size = r.integer("vocab_size", 1, 100000000);
  const std::string mlp = r.choice("mlp", {"gelu", "swiglu", "squared-relu"}, "gelu");
  m.mlp = mlp == "swiglu" ? Mlp::SwiGlu : mlp == "squared-relu" ? Mlp::SquaredRelu : Mlp::Gelu;
  m.tied_embeddings = r.boolean("tied_embeddings", true);
  m.norm = r.choice("norm", {"layernorm", "rmsnorm"}, "layernorm") == "rmsnorm" ? Norm::RmsNorm : Norm::LayerNorm;
  m.linear_bias = r.boolean("linear_bias", true);
  const std::string position = r.choice("position_embedding", {"learned", "rotary", "alibi"}, "learned");
  m.position_embedding = position == "rotary"  ? PositionEmbedding::Rotary
                         : position == "alibi" ? PositionEmbedding::Alibi
                                               : PositionEmbedding::Learned;
  m.embedding_norm = r.boolean("embedding_norm", false);
  m.dropout = r.boolean("dropout", true);
  m.head_dim = r.integer("head_dim", 1, 100000, 0);
  m.parallel_layers = r.boolean("parallel_layers", false);
  m.qk_norm = r.boolean("qk_norm", false);
  m.mtp_layers = r.integer("mtp_layers", 0, 16, 0);
  parse_experts(r, m);
  parse_latent_attention(r, m);
  r.finish();
  if (m.parallel_layers && (m.moe() || m.mla()))
    r.fail("parallel_layers", "parallel layers are modelled for dense blocks with standard attention projections only "
                              "(a mixture of experts or latent attention runs its blocks in sequence)");
  if (m.mtp_layers > 0 && m.parallel_layers)
    r.fail("mtp_layers", "multi-token prediction is modelled for sequential blocks (its module's block is the model's)");
  if (m.qk_norm && (m.parallel_layers || m.mla()))
    r.fail("qk_norm", "QK-norm is modelled for sequential blocks with standard attention projections only");
  if (m.head_dim == 0 && !m.mla() && m.hidden_size % m.num_heads != 0)
    r.fail("num_heads", fmt::format("{} does not divide model.hidden_size ({})", m.num_heads, m.hidden_size));
  if (m.num_heads % m.num_kv_heads != 0)
    r.fail("num_kv_heads", fmt::format("{} does not divide model.num_heads ({})", m.num_kv_heads, m.num_heads));
  return transformer_family(std::move(m));
}

// A vision transformer: transformer blocks over image patches and a class token.
std::shared_ptr<const Family> parse_vit(Reader& r, const std::string& name, const std::shared_ptr<const Origins>&) {
  TransformerSpec m;
  m.name = name;
  m.num_layers = r.integer("num_layers", 1, 10000);
  m.hidden_size = r.integer("hidden_size", 1, 1000000);
  m.num_heads = r.integer("num_heads", 1, 100000);
  m.num_kv_heads = m.num_heads;
  m.ffn_hidden_size = r.integer("ffn_hidden_size", 1, 10000000, 4 * m.hidden_size);
  m.image_size = r.integer("image_size", 1, 100000);
  m.patch_size = r.integer("patch_size", 1, 100000);
  m.channels = r.integer("channels", 1, 100000, 3);
  m.classes = r.integer("classes", 1, 10000000);
  m.dropout = r.boolean("dropout", false);
  m.tied_embeddings = false;
  m.vocab_size = 0;
  r.finish();
  if (m.image_size % m.patch_size != 0)
    r.fail("patch_size", fmt::format("{} does not divide model.image_size ({})", m.patch_size, m.image_size));
  if (m.hidden_size % m.num_heads != 0)
    r.fail("num_heads", fmt::format("{} does not divide model.hidden_size ({})", m.num_heads, m.hidden_size));
  const std::int64_t side = m.image_size / m.patch_size;
  m.seq_len = side * side + 1;  // the patches and the class token
  return transformer_family(std::move(m));
}

}  // namespace

std::shared_ptr<const Family> transformer_family(TransformerSpec spec) { return std::make_shared<TransformerFamily>(std::move(spec)); }

std::vector<FamilyKind> transformer_kinds() {
  FamilyKind language{"transformer", parse_transformer, {
      {"num_layers", "transformer blocks"},
      {"hidden_size", "the model (embedding) width"},
      {"num_heads", "attention heads"},
      {"num_kv_heads", "key/value heads (grouped-query attention); default: num_heads"},
      {"head_dim", "the width of one head; default: hidden_size / num_heads"},
      {"ffn_hidden_size", "the MLP's inner width; default 4 x hidden_size"},
      {"seq_len", "tokens per sample"},
      {"vocab_size", "vocabulary size (embedding and output layer)"},
      {"mlp", "the MLP: gelu or squared-relu (two matrices around relu(x)^2, Nemotron-4), or swiglu (three)"},
      {"norm", "layernorm or rmsnorm"},
      {"position_embedding", "learned (a table of seq_len x hidden_size), rotary, or alibi (a bias by distance inside the attention kernel: no table)"},
      {"embedding_norm", "a LayerNorm of the embedding's output before the first block (BLOOM)"},
      {"qk_norm", "every query and key head normalised over its head width after the projection (Qwen3, OLMo 2; Megatron-Core --qk-layernorm)"},
      {"mtp_layers", "multi-token prediction modules after the last block, each one token further (DeepSeek-V3; Megatron-Core --mtp-num-layers): two norms, a 2h-to-h projection, a block and the shared head and loss"},
      {"tied_embeddings", "the output layer shares the input embedding's weights"},
      {"linear_bias", "linear layers carry biases"},
      {"dropout", "dropout layers run (their masks are kept for backward)"},
      {"parallel_layers", "attention and MLP side by side on one norm, y = x + attn(norm(x)) + mlp(norm(x)) (GPT-J, PaLM): fused input and output projections"},
      {"num_experts", "mixture of experts: routed experts per MoE layer"},
      {"experts_per_token", "mixture of experts: experts each token is routed to (top-k)"},
      {"expert_ffn_hidden_size", "mixture of experts: one expert's MLP inner width"},
      {"shared_experts", "mixture of experts: experts every token goes through besides its routed ones"},
      {"first_dense_layers", "mixture of experts: leading layers with a dense MLP instead of experts"},
      {"capacity_factor", "mixture of experts: tokens an expert takes, as a multiple of its fair share (0: dropless)"},
      {"expert_bias", "mixture of experts: expert MLPs carry biases"},
      {"q_lora_rank", "multi-head latent attention: the query's low-rank width (0: full-rank queries)"},
      {"kv_lora_rank", "multi-head latent attention: the compressed key/value width"},
      {"qk_nope_head_dim", "multi-head latent attention: per-head query/key width without rotary"},
      {"qk_rope_head_dim", "multi-head latent attention: per-head query/key width with rotary"},
      {"v_head_dim", "multi-head latent attention: per-head value width"},
  }};
  // The keys a vision transformer shares with a language model are documented above.
  FamilyKind vision{"vit", parse_vit, {
      {"image_size", "vision models: image height and width in pixels"},
      {"patch_size", "vision transformers: patch height and width in pixels"},
      {"channels", "vision models: input channels"},
      {"classes", "vision models: output classes"},
  }};
  return {language, vision};
}

}  // namespace dtsim::models
