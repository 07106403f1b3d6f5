#include "sim/config/import_hf.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "sim/core/errors.hpp"
#include "sim/core/suggest.hpp"

namespace dtsim::config {

namespace {

using Json = nlohmann::json;

// Keys that change neither the work of a step nor the memory it holds.
const std::set<std::string>& cost_free_keys() {
  static const std::set<std::string> keys{
      "architectures", "model_type", "transformers_version", "torch_dtype", "dtype", "bos_token_id", "eos_token_id",
      "pad_token_id", "initializer_range", "rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "use_cache",
      "rope_theta", "rope_scaling", "attention_dropout", "hidden_dropout_prob", "attention_probs_dropout_prob",
      "output_router_logits", "router_aux_loss_coef", "router_jitter_noise", "aux_loss_alpha", "seq_aux",
      "norm_topk_prob", "routed_scaling_factor", "scoring_func", "topk_method", "topk_group", "n_group",
      "pretraining_tp", "sliding_window", "use_sliding_window", "max_window_layers", "id2label", "label2id",
      "qkv_bias", "encoder_stride", "task_specific_params", "summary_type", "summary_use_proj", "summary_activation",
      "summary_proj_to_labels", "summary_first_dropout", "scale_attn_weights", "reorder_and_upcast_attn",
      "scale_attn_by_inverse_layer_idx", "embd_pdrop", "attn_pdrop", "bos_token", "eos_token", "ep_size",
      "num_nextn_predict_layers", "quantization_config", "moe_layer_freq", "tie_encoder_decoder", "problem_type",
      "head_dim_multiplier", "decoder_sparse_step", "mlp_only_layers", "router_dtype"};
  return keys;
}

class Mapper {
 public:
  Mapper(const Json& config, std::string file) : config_(config), file_(std::move(file)) {}

  bool has(const char* key) const { return config_.contains(key) && !config_[key].is_null(); }
  std::int64_t integer(const char* key) {
    if (!has(key) || !config_[key].is_number_integer())
      throw InputError(file_, std::string("/") + key, "required for this model family: an integer");
    used_.insert(key);
    return config_[key].get<std::int64_t>();
  }
  std::int64_t integer(const char* key, std::int64_t fallback) { return has(key) ? integer(key) : fallback; }
  Json value(const char* key, Json fallback) {
    if (!has(key)) return fallback;
    used_.insert(key);
    return config_[key];
  }
  void use(const char* key) { used_.insert(key); }
  void unmapped(const char* key, const std::string& why) {
    if (has(key)) unmapped_.push_back(fmt::format("{} ({})", key, why)), used_.insert(key);
  }

  ImportedModel finish(nlohmann::ordered_json model, const std::string& family) {
    ImportedModel out{std::move(model), family, {}, {}, std::move(unmapped_)};
    for (const auto& [key, v] : config_.items()) {
      if (used_.contains(key) && std::none_of(out.unmapped.begin(), out.unmapped.end(),
                                              [&](const std::string& u) { return u.rfind(key + " (", 0) == 0; }))
        out.mapped.push_back(key);
      else if (!used_.contains(key) && cost_free_keys().contains(key)) out.ignored.push_back(key);
      else if (!used_.contains(key)) out.unmapped.push_back(key + " (not read by this importer)");
    }
    return out;
  }

 private:
  const Json& config_;
  std::string file_;
  std::set<std::string> used_;
  std::vector<std::string> unmapped_;
};

std::string mlp_of(Mapper& m, const char* key, const char* fallback) {
  const std::string act = m.value(key, fallback).get<std::string>();
  if (act == "relu2") return "squared-relu";                     // Nemotron's relu(x)^2
  return act == "silu" || act == "swiglu" ? "swiglu" : "gelu";  // a gated SiLU MLP is SwiGLU
}

// Layers, width and heads under the names most Hugging Face families use.
nlohmann::ordered_json sized(Mapper& m, const char* kind) {
  return {{"kind", kind},
          {"num_layers", m.integer("num_hidden_layers")},
          {"hidden_size", m.integer("hidden_size")},
          {"num_heads", m.integer("num_attention_heads")}};
}

// Llama and the families built like it (Mistral, Mixtral, Qwen2/3 and their MoE).
nlohmann::ordered_json llama_like(Mapper& m) {
  nlohmann::ordered_json model = sized(m, "transformer");
  model["num_kv_heads"] = m.integer("num_key_value_heads", model["num_heads"].get<std::int64_t>());
  if (m.has("head_dim")) model["head_dim"] = m.integer("head_dim");
  model["ffn_hidden_size"] = m.integer("intermediate_size");
  // The longest context the model takes; training often runs shorter (set model.seq_len).
  model["seq_len"] = m.integer("max_position_embeddings");
  model["vocab_size"] = m.integer("vocab_size");
  model["mlp"] = mlp_of(m, "hidden_act", "silu");
  model["tied_embeddings"] = m.value("tie_word_embeddings", false);
  model["norm"] = "rmsnorm";
  model["linear_bias"] = m.value("mlp_bias", false);
  m.unmapped("attention_bias", "biases on the attention projections alone are not modelled");
  model["position_embedding"] = "rotary";
  model["dropout"] = false;
  return model;
}

void experts(Mapper& m, nlohmann::ordered_json& model, const char* count_key, const char* size_key) {
  model["num_experts"] = m.integer(count_key);
  model["experts_per_token"] = m.integer("num_experts_per_tok");
  model["expert_ffn_hidden_size"] = m.integer(size_key);
  model["capacity_factor"] = 0;  // dropless, as these families train
}

nlohmann::ordered_json deepseek(Mapper& m) {
  nlohmann::ordered_json model = llama_like(m);
  model["num_kv_heads"] = model["num_heads"];  // latent attention: one key/value per head
  experts(m, model, "n_routed_experts", "moe_intermediate_size");
  model["shared_experts"] = m.integer("n_shared_experts", 0);
  model["first_dense_layers"] = m.integer("first_k_dense_replace", 0);
  model["q_lora_rank"] = m.value("q_lora_rank", 0);
  for (const char* k : {"kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"}) model[k] = m.integer(k);
  return model;
}

nlohmann::ordered_json gpt2(Mapper& m) {
  nlohmann::ordered_json model{{"kind", "transformer"}};
  model["num_layers"] = m.integer("n_layer");
  model["hidden_size"] = m.integer("n_embd");
  model["num_heads"] = m.integer("n_head");
  model["ffn_hidden_size"] = m.integer("n_inner", 4 * model["hidden_size"].get<std::int64_t>());
  model["seq_len"] = m.integer("n_positions");
  m.use("n_ctx");
  model["vocab_size"] = m.integer("vocab_size");
  model["mlp"] = mlp_of(m, "activation_function", "gelu_new");
  model["tied_embeddings"] = m.value("tie_word_embeddings", true);
  model["norm"] = "layernorm";
  model["linear_bias"] = true;
  model["position_embedding"] = "learned";
  model["dropout"] = m.value("resid_pdrop", 0.1).get<double>() > 0;
  return model;
}

// GPT-NeoX (Pythia) with use_parallel_residual, its default: attention and MLP side by side. NeoX
// normalises x twice (input_layernorm, post_attention_layernorm); dtsim's parallel block has one
// norm, so the second's pass and 2h parameters a block are left out (named as unmapped).
nlohmann::ordered_json gpt_neox(Mapper& m) {
  nlohmann::ordered_json model = sized(m, "transformer");
  model["ffn_hidden_size"] = m.integer("intermediate_size");
  model["seq_len"] = m.integer("max_position_embeddings");
  model["vocab_size"] = m.integer("vocab_size");
  model["mlp"] = mlp_of(m, "hidden_act", "gelu");
  model["tied_embeddings"] = m.value("tie_word_embeddings", false);
  model["norm"] = "layernorm";
  model["linear_bias"] = m.value("attention_bias", true);
  model["position_embedding"] = "rotary";
  for (const char* k : {"rotary_pct", "rotary_emb_base"}) m.use(k);
  model["dropout"] = m.value("hidden_dropout", 0.0).get<double>() > 0;
  model["parallel_layers"] = m.value("use_parallel_residual", true);
  if (model["parallel_layers"].get<bool>())
    m.unmapped("use_parallel_residual", "its second layer norm of the same input is not counted");
  return model;
}

// GPT-J: parallel attention and MLP on one layer norm, rotary on rotary_dim of each head; biases
// on the MLP only (dtsim puts them on every linear).
nlohmann::ordered_json gptj(Mapper& m) {
  nlohmann::ordered_json model = gpt2(m);
  model["tied_embeddings"] = m.value("tie_word_embeddings", false);
  model["position_embedding"] = "rotary";
  m.use("rotary_dim");
  model["parallel_layers"] = true;
  return model;
}

// Falcon: attention and MLP in parallel (parallel_attn), multi-query attention (multi_query) or,
// under new_decoder_architecture, num_kv_heads key/value heads and two layer norms of the same
// input (ln_attn, ln_mlp: the second left out, as for NeoX).
nlohmann::ordered_json falcon(Mapper& m) {
  nlohmann::ordered_json model = sized(m, "transformer");
  const auto hidden = model["hidden_size"].get<std::int64_t>(), heads = model["num_heads"].get<std::int64_t>();
  const bool new_architecture = m.value("new_decoder_architecture", false).get<bool>();
  const bool multi_query = m.value("multi_query", true).get<bool>();
  model["num_kv_heads"] = new_architecture ? m.integer("num_kv_heads", heads) : multi_query ? 1 : heads;
  if (!new_architecture) m.use("num_kv_heads");
  model["ffn_hidden_size"] = m.integer("ffn_hidden_size", 4 * hidden);
  model["seq_len"] = m.integer("max_position_embeddings", 2048);
  model["vocab_size"] = m.integer("vocab_size");
  model["mlp"] = "gelu";
  m.use("activation");
  model["tied_embeddings"] = m.value("tie_word_embeddings", true);
  model["norm"] = "layernorm";
  model["linear_bias"] = m.value("bias", false);
  model["position_embedding"] = m.value("alibi", false).get<bool>() ? "alibi" : "rotary";
  model["dropout"] = m.value("hidden_dropout", 0.0).get<double>() > 0;
  model["parallel_layers"] = m.value("parallel_attn", true);
  if (new_architecture && model["parallel_layers"].get<bool>())
    m.unmapped("new_decoder_architecture", "its second layer norm of the same input is not counted");
  return model;
}

// BLOOM (BigScience 2022, arXiv:2211.05100, Sec. 3.2.2): ALiBi positions, a LayerNorm after the
// embedding, a GELU MLP, biases, tied embeddings. The config names no sequence length: 2,048, the
// length BLOOM trained at (Table 3). Older configs name the width n_embed and heads
// num_attention_heads.
nlohmann::ordered_json bloom(Mapper& m) {
  nlohmann::ordered_json model{{"kind", "transformer"}};
  model["num_layers"] = m.integer("n_layer");
  const std::int64_t hidden = m.has("n_embed") ? m.integer("n_embed") : m.integer("hidden_size");
  model["hidden_size"] = hidden;
  model["num_heads"] = m.has("n_head") ? m.integer("n_head") : m.integer("num_attention_heads");
  model["ffn_hidden_size"] = m.integer("n_inner", 4 * hidden);
  m.use("n_inner");  // null: 4 x hidden
  model["seq_len"] = m.integer("seq_length", 2048);
  model["vocab_size"] = m.integer("vocab_size");
  model["mlp"] = "gelu";
  model["tied_embeddings"] = m.value("tie_word_embeddings", true);
  model["norm"] = "layernorm";
  model["linear_bias"] = true;
  model["position_embedding"] = "alibi";
  model["embedding_norm"] = true;
  model["dropout"] = m.value("hidden_dropout", 0.0).get<double>() > 0;
  // Kernel fusions and inference settings of Megatron-DeepSpeed's and Hugging Face's code.
  for (const char* k : {"offset_alibi", "masked_softmax_fusion", "attention_softmax_in_fp32", "bias_dropout_fusion",
                        "skip_bias_add", "skip_bias_add_qkv", "slow_but_exact", "unk_token_id"})
    m.use(k);
  if (m.value("apply_residual_connection_post_layernorm", false).get<bool>())
    m.unmapped("apply_residual_connection_post_layernorm", "the residual taken after the norm is priced as the usual one");
  return model;
}

nlohmann::ordered_json vit(Mapper& m) {
  nlohmann::ordered_json model = sized(m, "vit");
  model["ffn_hidden_size"] = m.integer("intermediate_size");
  model["image_size"] = m.integer("image_size");
  model["patch_size"] = m.integer("patch_size");
  model["channels"] = m.integer("num_channels", 3);
  model["classes"] = m.has("id2label") ? static_cast<std::int64_t>(m.value("id2label", Json::object()).size())
                                       : m.integer("num_labels", 1000);
  m.use("hidden_act");
  return model;
}

}  // namespace

std::vector<std::string> hf_families() {
  return {"llama",       "mistral",     "mixtral", "qwen2", "qwen3",    "qwen2_moe", "qwen3_moe",
          "deepseek_v2", "deepseek_v3", "gpt2",    "gptj",  "gpt_neox", "falcon",    "bloom",     "vit"};
}

ImportedModel import_hf_config(const Json& config, const std::string& file) {
  if (!config.is_object()) throw InputError(file, "", "expected a Hugging Face config.json (a JSON object)");
  if (!config.contains("model_type") || !config["model_type"].is_string())
    throw InputError(file, "/model_type", "required: the model family (one of: " + fmt::format("{}", fmt::join(hf_families(), ", ")) + ")");
  const std::string family = config["model_type"].get<std::string>();
  Mapper m(config, file);
  m.use("model_type");
  nlohmann::ordered_json model;
  if (family == "llama" || family == "mistral" || family == "qwen2" || family == "qwen3") {
    model = llama_like(m);
    if (family == "qwen3") model["qk_norm"] = true;  // Qwen3Attention's q_norm and k_norm
  } else if (family == "mixtral") {
    model = llama_like(m);
    experts(m, model, "num_local_experts", "intermediate_size");
  } else if (family == "qwen2_moe" || family == "qwen3_moe") {
    model = llama_like(m);
    experts(m, model, "num_experts", "moe_intermediate_size");
    if (family == "qwen3_moe") model["qk_norm"] = true;
    m.unmapped("shared_expert_intermediate_size", "a shared expert wider than the routed ones is not modelled");
  } else if (family == "deepseek_v2" || family == "deepseek_v3") {
    model = deepseek(m);
  } else if (family == "gpt2") {
    model = gpt2(m);
  } else if (family == "gptj") {
    model = gptj(m);
  } else if (family == "gpt_neox") {
    model = gpt_neox(m);
  } else if (family == "falcon") {
    model = falcon(m);
  } else if (family == "bloom") {
    model = bloom(m);
  } else if (family == "vit") {
    model = vit(m);
  } else {
    throw InputError(file, "/model_type", fmt::format("\"{}\" is not a family dtsim imports (one of: {}){}", family,
                                                      fmt::join(hf_families(), ", "), did_you_mean(family, hf_families())));
  }
  return m.finish(std::move(model), family);
}

}  // namespace dtsim::config
