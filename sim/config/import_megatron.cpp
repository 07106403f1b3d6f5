// Megatron-LM's arguments (megatron/training/arguments.py) as dtsim scenario keys.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <regex>
#include <sstream>

#include "sim/config/import_megatron_args.hpp"
#include "sim/core/errors.hpp"
#include "strategies/spec.hpp"

namespace dtsim::config {

namespace {

using namespace megatron_args;

// NAME=value and NAME=${OTHER:-value} lines, as the launch scripts set their sizes.
std::map<std::string, std::string> shell_assignments(const std::string& text) {
  std::map<std::string, std::string> vars;
  static const std::regex assign(R"(^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(\S*))");
  static const std::regex fallback(R"(^"?\$\{[A-Za-z_][A-Za-z0-9_]*:-\"?([^}"]*)\"?\}"?$)");
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, assign)) continue;
    std::string v = m[2];
    std::smatch f;
    if (std::regex_match(v, f, fallback)) v = f[1];
    if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front()) v = v.substr(1, v.size() - 2);
    vars[m[1]] = v;
  }
  return vars;
}

std::string substitute(std::string token, const std::map<std::string, std::string>& vars) {
  static const std::regex ref(R"(\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?)");
  std::smatch m;
  if (std::regex_match(token, m, ref)) {
    auto it = vars.find(m[1]);
    return it != vars.end() ? it->second : token;
  }
  return token;
}

// Every "--flag [value]" in the text, quoted groups split as the shell would split them. A value
// sits on its flag's line: what follows on the next line is shell syntax, not a value.
Args parse_args(const std::string& text) {
  const auto vars = shell_assignments(text);
  Args args;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (const auto hash = line.find('#'); hash != std::string::npos && line.find("--") > hash) continue;
    if (const auto hash = line.find(" #"); hash != std::string::npos) line.erase(hash);
    std::vector<std::string> tokens;
    std::istringstream words(line);
    for (std::string w; words >> w;) {
      // Parentheses are shell syntax, except inside a pipeline layout ("Et*3|(tt|)*29,m|L") or a
      // Python list expression ("([0]*3+[1]*58)", --moe-layer-freq).
      const bool literal = (w.find('|') != std::string::npos && w.find('*') != std::string::npos) || w.find('[') != std::string::npos;
      std::erase_if(w, [&](char c) { return c == '"' || c == '\\' || (literal ? c == '\'' : c == '(' || c == ')'); });
      if (!w.empty()) tokens.push_back(substitute(w, vars));
    }
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i].rfind("--", 0) != 0 || tokens[i].size() < 3) continue;
      const bool value = i + 1 < tokens.size() && tokens[i + 1].rfind("--", 0) != 0;
      std::string v = value ? tokens[i + 1] : "";
      // A list (nargs='*'): every value up to the next flag, space-separated.
      if (tokens[i] == "--recompute-modules")
        for (std::size_t j = i + 2; j < tokens.size() && tokens[j].rfind("--", 0) != 0; ++j) v += " " + tokens[j];
      args.emplace_back(tokens[i], v);
    }
  }
  return args;
}


// Megatron-Core's multi-head latent attention flags (MLATransformerConfig), by dtsim's key.
const std::map<std::string, const char*>& latent_attention_flags() {
  static const std::map<std::string, const char*> flags{{"--multi-latent-attention", ""},
                                                        {"--q-lora-rank", "q_lora_rank"},
                                                        {"--kv-lora-rank", "kv_lora_rank"},
                                                        {"--qk-head-dim", "qk_nope_head_dim"},
                                                        {"--qk-pos-emb-head-dim", "qk_rope_head_dim"},
                                                        {"--v-head-dim", "v_head_dim"}};
  return flags;
}

void map_model(const std::string& f, const std::string& v, Mapper& m) {
  auto& model = m.run.model;
  static const std::map<std::string, const char*> sizes{
      {"--num-layers", "num_layers"},          {"--hidden-size", "hidden_size"},   {"--ffn-hidden-size", "ffn_hidden_size"},
      {"--num-attention-heads", "num_heads"}, {"--num-query-groups", "num_kv_heads"}, {"--seq-length", "seq_len"},
      {"--vocab-size", "vocab_size"},          {"--kv-channels", "head_dim"},      {"--num-experts", "num_experts"},
      {"--moe-router-topk", "experts_per_token"}, {"--moe-ffn-hidden-size", "expert_ffn_hidden_size"}};
  if (auto it = sizes.find(f); it != sizes.end()) {
    m.number(f, v, model, it->second);
  } else if (f == "--group-query-attention") {
    m.run.mapped.push_back(f);  // num_kv_heads comes from --num-query-groups
  } else if (f == "--swiglu") {
    model["mlp"] = "swiglu", m.run.mapped.push_back(f);
  } else if (f == "--squared-relu") {
    model["mlp"] = "squared-relu", m.run.mapped.push_back(f);
  } else if (f == "--normalization") {
    model["norm"] = v == "RMSNorm" ? "rmsnorm" : "layernorm", m.run.mapped.push_back(f);
  } else if (f == "--position-embedding-type") {
    model["position_embedding"] = v == "rope" ? "rotary" : v == "alibi" ? "alibi" : "learned", m.run.mapped.push_back(f);
  } else if (f == "--qk-layernorm") {
    model["qk_norm"] = true, m.run.mapped.push_back(f);
  } else if (f == "--embed-layernorm") {  // BigScience Megatron-DeepSpeed (BLOOM)
    model["embedding_norm"] = true, m.run.mapped.push_back(f);
  } else if (f == "--untie-embeddings-and-output-weights") {
    model["tied_embeddings"] = false, m.run.mapped.push_back(f);
  } else if (f == "--moe-shared-expert-intermediate-size" || f == "--moe-layer-freq" || latent_attention_flags().contains(f)) {
    m.run.mapped.push_back(f);  // read after the loop (map_shared_experts, map_moe_layers, map_latent_attention)
  } else if (f == "--mtp-num-layers") {
    m.number(f, v, model, "mtp_layers");
  } else if (f == "--disable-bias-linear") {
    model["linear_bias"] = false, m.run.mapped.push_back(f);
  }
}

void map_parallelism(const std::string& f, const std::string& v, Mapper& m) {
  auto& p = m.run.parallelism;
  static const std::map<std::string, const char*> degrees{{"--tensor-model-parallel-size", "tensor"},
                                                         {"--pipeline-model-parallel-size", "pipeline"},
                                                         {"--context-parallel-size", "context"},
                                                         {"--expert-model-parallel-size", "expert"},
                                                         {"--micro-batch-size", "micro_batch_size"}};
  if (auto it = degrees.find(f); it != degrees.end()) {
    m.number(f, v, p, it->second);
  } else if (f == "--num-layers-per-virtual-pipeline-stage" || f == "--num-virtual-stages-per-pipeline-rank" ||
             f == "--decoder-first-pipeline-num-layers" || f == "--decoder-last-pipeline-num-layers" ||
             f == "--pipeline-model-parallel-layout" || f == "--account-for-embedding-in-pipeline-split" ||
             f == "--account-for-loss-in-pipeline-split") {
    m.run.mapped.push_back(f);  // read together once the layers and stages are known (map_pipeline_split)
  } else if (f == "--sequence-parallel") {
    p["sequence_parallel"] = true, m.run.mapped.push_back(f);
  } else if (f == "--use-distributed-optimizer") {
    p["zero_stage"] = 1, m.run.mapped.push_back(f);
  } else if (f == "--overlap-grad-reduce") {
    p["overlap_grad_reduce"] = true, m.run.mapped.push_back(f);
  } else if (f == "--overlap-param-gather") {
    p["overlap_param_gather"] = true, m.run.mapped.push_back(f);
  } else if (f == "--recompute-granularity") {
    p["recompute"] = v == "selective" ? "selective" : "full", m.run.mapped.push_back(f);
  } else if (f == "--recompute-activations") {
    p["recompute"] = "selective", m.run.mapped.push_back(f);
  } else if (f == "--recompute-method" || f == "--recompute-num-layers" || f == "--recompute-modules") {
    m.run.mapped.push_back(f);  // read together after the loop (map_recompute_blocks, map_recompute_modules)
  } else if ((f == "--moe-token-dispatcher-type" && v == "alltoall") || f == "--moe-enable-deepep" ||
             (f == "--moe-flex-dispatcher-backend" && v == "deepep")) {
    m.run.mapped.push_back(f);
  } else if (f == "--moe-token-dispatcher-type" && v == "flex") {
    p["moe_dispatcher"] = "deepep", m.run.mapped.push_back(f);  // DeepEP, the flex dispatcher's default backend
  } else if (f == "--moe-router-group-topk") {
    // Group-limited routing over --moe-router-num-groups expert groups: dtsim takes the groups as
    // the expert-parallel group's nodes, as DeepSeek-V3's node-limited routing sets them.
    m.number(f, v, p, "moe_node_limit");
  } else if (f == "--moe-router-num-groups") {
    m.run.mapped.push_back(f);
  } else if (f == "--expert-tensor-parallel-size") {
    m.number(f, v, p, "expert_tensor");
  } else if (f == "--moe-shared-expert-overlap") {
    p["moe_shared_expert_overlap"] = true, m.run.mapped.push_back(f);
  } else if (f == "--overlap-moe-expert-parallel-comm") {
    p["moe_a2a_overlap"] = "megatron-1f1b", m.run.mapped.push_back(f);
  } else if (f == "--moe-grouped-gemm" || f == "--moe-permute-fusion" || f == "--moe-router-fusion") {
    // Each expert linear as one grouped GEMM, the permutation and the router as the fused kernels
    // run them: as dtsim prices them (models/transformer_moe.cpp).
    m.run.mapped.push_back(f);
  }
}


// Which blocks --recompute-granularity full reaches (TransformerBlock._checkpointed_forward): the
// first N of each pipeline chunk (--recompute-method block), or all, N at a time (uniform; 1 is
// plain full recomputation). Without full granularity Megatron reads neither flag.
void map_recompute_blocks(const Args& args, Mapper& m) {
  std::string method, layers;
  for (const auto& [flag, value] : args) {
    if (flag == "--recompute-method") method = value;
    if (flag == "--recompute-num-layers") layers = value;
  }
  if (method.empty() && layers.empty()) return;
  auto& p = m.run.parallelism;
  auto drop = [&](const std::string& why) {
    for (const char* f : {"--recompute-method", "--recompute-num-layers"})
      if (std::erase(m.run.mapped, std::string(f)) > 0) m.run.ignored.push_back(fmt::format("{} ({})", f, why));
  };
  if (p.value("recompute", std::string()) != "full") return drop("read only with --recompute-granularity full");
  if (method != "block" && method != "uniform") return drop("needs --recompute-method block or uniform");
  nlohmann::ordered_json n;
  std::erase(m.run.mapped, std::string("--recompute-num-layers"));
  if (layers.empty() || !m.number("--recompute-num-layers", layers, n, "layers")) return;
  if (method == "block") p["recompute_layers"] = n["layers"];
  else if (n["layers"].get<long long>() > 1) p["recompute_group"] = n["layers"];
}

// --recompute-modules under --recompute-granularity selective (Megatron reads it only there); the
// modules dtsim does not model are named as unmapped, the rest kept.
void map_recompute_modules(const Args& args, Mapper& m) {
  const auto it = std::find_if(args.begin(), args.end(), [](const auto& a) { return a.first == "--recompute-modules"; });
  if (it == args.end()) return;
  const std::string f = it->first;
  std::erase(m.run.mapped, f);
  auto& p = m.run.parallelism;
  if (p.value("recompute", std::string()) != "selective")
    return m.run.ignored.push_back(f + " (read only with --recompute-granularity selective)");
  nlohmann::ordered_json modules = nlohmann::ordered_json::array();
  std::istringstream names(it->second);
  for (std::string name; names >> name;) {
    if (strategies::recompute_module_bit(name)) modules.push_back(name);
    else m.run.unmapped.push_back(fmt::format("{} {} (not modelled)", f, name));
  }
  p["recompute_modules"] = modules;
  m.run.mapped.push_back(f);
}

void map_training(const std::string& f, const std::string& v, Mapper& m) {
  auto& t = m.run.training;
  if (f == "--global-batch-size") m.number(f, v, t, "global_batch_size");
  else if (f == "--train-iters") m.number(f, v, t, "steps");
  else if (f == "--train-samples") m.number(f, v, t, "train_samples");
  else if (f == "--bf16") t["precision"] = "bf16", m.run.mapped.push_back(f);
  else if (f == "--fp16") t["precision"] = "fp16", m.run.mapped.push_back(f);
  else if (f == "--fp8-format") t["precision"] = "fp8", m.run.mapped.push_back(f);
  // arguments.py --fp8-recipe: tensorwise is TE's Float8CurrentScaling, blockwise its
  // Float8BlockScaling, mxfp8 its MXFP8BlockScaling.
  else if (f == "--fp8-recipe" && (v == "delayed" || v == "tensorwise" || v == "blockwise" || v == "mxfp8"))
    t["fp8_recipe"] = v == "tensorwise" ? std::string("current") : v, m.run.mapped.push_back(f);
  else if (f == "--use-flash-attn" || (f == "--attention-backend" && (v == "flash" || v == "fused")))
    t["attention"] = "flash", m.run.mapped.push_back(f);
  else if (f == "--transformer-impl" && v == "transformer_engine") {
    if (!m.run.stack.contains("preset")) m.run.stack["preset"] = "megatron-te";  // --tp-comm-overlap names TE too
    m.run.mapped.push_back(f);
  }
  else if (f == "--transformer-impl" && v == "local") m.run.stack["preset"] = "default", m.run.mapped.push_back(f);
  else if (f == "--grad-reduce-in-bf16") m.run.stack["grad_reduce_dtype"] = "bf16", m.run.mapped.push_back(f);
  else if (f == "--tp-comm-overlap") m.run.stack["preset"] = "megatron-te-tp-overlap", m.run.mapped.push_back(f);
  else if (f == "--fp8-param-gather") m.run.stack["fp8_weight_copies"] = "fp8-params", m.run.mapped.push_back(f);
  // The vocabulary-parallel loss as one fused kernel (either implementation Megatron-Core offers).
  else if (f == "--cross-entropy-loss-fusion") m.run.stack["loss"] = "fused", m.run.mapped.push_back(f);
  else if (f == "--cross-entropy-fusion-impl") m.run.mapped.push_back(f);
  // Megatron pads the vocabulary to this x TP (vocab_utils.py); the stack pads the model's likewise.
  else if (f == "--make-vocab-size-divisible-by") m.number(f, v, m.run.stack, "vocab_divisible_by");
}

// The default stack keeps the ZeRO paper's buffers, so Megatron's bf16 gradient buffer means
// nothing there. Megatron-Core builds its layers with Transformer Engine unless told otherwise
// (megatron/core/transformer/transformer_config.py @d98e8a6), but a script that does not say so
// keeps dtsim's default stack: megatron-te's caching-allocator estimate would report NVIDIA's own
// Llama 3 8B FP8 example as not fitting an H100 (docs/stacks.md, "Megatron-LM's gradient buffer").
void drop_unheld_grad_reduce(ImportedRun& run) {
  if (run.stack.value("preset", "default") == "default" && run.stack.contains("grad_reduce_dtype")) {
    run.stack.erase("grad_reduce_dtype");
    std::erase(run.mapped, std::string("--grad-reduce-in-bf16"));
    run.ignored.push_back("--grad-reduce-in-bf16 (dtsim's default stack keeps 2 + 2 + 12 bytes: give --transformer-impl "
                          "transformer_engine for Megatron's own buffers)");
  }
}

// --moe-shared-expert-intermediate-size: the shared experts' width, as dtsim's count of experts of
// --moe-ffn-hidden-size each (Megatron builds them as one MLP of that width).
void map_shared_experts(const Args& args, Mapper& m) {
  const long long width = flag_number(args, "--moe-shared-expert-intermediate-size");
  if (width <= 0) return;
  const long long expert = m.run.model.value("expert_ffn_hidden_size", 0LL);
  if (expert > 0 && width % expert == 0) return void(m.run.model["shared_experts"] = width / expert);
  std::erase(m.run.mapped, std::string("--moe-shared-expert-intermediate-size"));
  m.run.unmapped.push_back(fmt::format("--moe-shared-expert-intermediate-size {} (not a multiple of --moe-ffn-hidden-size {})", width, expert));
}

// Latent attention's sizes, read only under --multi-latent-attention (Megatron builds an
// MLATransformerConfig then); without it Megatron ignores them.
void map_latent_attention(const Args& args, Mapper& m) {
  const bool on = has_flag(args, "--multi-latent-attention");
  for (const auto& [flag, value] : args) {
    const auto it = latent_attention_flags().find(flag);
    if (it == latent_attention_flags().end() || !*it->second) continue;
    std::erase(m.run.mapped, flag);
    if (on) m.number(flag, value, m.run.model, it->second);
    else m.run.ignored.push_back(flag + " (read only with --multi-latent-attention)");
  }
  if (!on) return;
  // MLATransformerConfig's defaults (transformer_config.py) for what the script leaves out.
  for (const auto& [key, value] : {std::pair{"q_lora_rank", 512}, {"kv_lora_rank", 512}, {"qk_nope_head_dim", 128},
                                   {"qk_rope_head_dim", 64}, {"v_head_dim", 128}})
    if (!m.run.model.contains(key)) m.run.model[key] = value;
}

// A Python list of 0s then 1s ("[0,0,0,1,1]"): how many 0s lead; -1 for anything else.
long long leading_zeros(const std::string& v) {
  if (v.size() < 3 || v.front() != '[' || v.back() != ']') return -1;
  long long zeros = 0, ones = 0;
  for (std::size_t i = 1; i + 1 < v.size(); i += 2) {
    const char c = v[i], next = v[i + 1];
    if ((next != ',' && i + 2 != v.size()) || (c != '0' && c != '1') || (c == '0' && ones > 0)) return -1;
    (c == '0' ? zeros : ones) += 1;
  }
  return ones > 0 ? zeros : -1;
}

// --moe-layer-freq: 1 (every layer an MoE one) or a pattern of leading dense layers,
// "([0]*N+[1]*M)" (DeepSeek-V3's first dense layers) or a list of 0s then 1s; other patterns are
// named as not mapped (dtsim's MoE layers follow first_dense_layers only).
void map_moe_layers(const Args& args, Mapper& m) {
  std::string v;
  for (const auto& [f, value] : args)
    if (f == "--moe-layer-freq") v = value;
  if (v.empty()) return;
  std::erase(v, ' ');
  static const std::regex repeat(R"(^\(?\[0\]\*(\d{1,5})\+\[1\]\*(\d{1,5})\)?$)");
  std::smatch match;
  if (v == "1") return;
  if (v.size() <= 64 && std::regex_match(v, match, repeat)) return void(m.run.model["first_dense_layers"] = std::stoll(match[1]));
  if (const long long dense = leading_zeros(v); dense >= 0) return void(m.run.model["first_dense_layers"] = dense);
  std::erase(m.run.mapped, std::string("--moe-layer-freq"));
  m.run.unmapped.push_back(fmt::format("--moe-layer-freq {} (dtsim's MoE layers follow its leading dense layers only)", v.substr(0, 64)));
}

// Flags that set neither time nor memory in dtsim's model: learning rates, data, logging, I/O.
bool no_effect(const std::string& f) {
  static const std::regex pattern(
      R"(^--(lr.*|min-lr|decoupled.*|weight-decay|adam-.*|clip-grad|init-method-std|seed|split|data-.*|tokenizer-.*|vocab-file|merge-file|tiktoken-.*|mock-data|log-.*|eval-.*|save.*|load|tensorboard-.*|wandb-.*|exit-.*|profile.*|ckpt-.*|distributed-timeout-minutes|num-workers|no-mmap-bin-files|no-create-attention-mask-in-dataloader|manual-gc|calculate-per-token-loss|use-mcore-models|max-position-embeddings|rotary-.*|attention-dropout|hidden-dropout|node_rank|master_addr|master_port|apply-layernorm-1p|fp8-amax-.*|empty-unused-memory-level)$)");
  return std::regex_match(f, pattern);
}

}  // namespace

ImportedRun import_megatron_args(const std::string& text, const std::string& file) {
  ImportedRun run;
  run.framework = "megatron";
  run.model["kind"] = "transformer";
  run.parallelism["framework"] = "megatron-lm";
  const Args args = parse_args(text);
  if (args.empty()) throw InputError(file, "", "no --arguments found: give Megatron-LM's command line or launch script");
  Mapper m{run, file};
  nlohmann::ordered_json launch = nlohmann::ordered_json::object();
  for (const auto& [flag, value] : args) {
    if (flag == "--nproc_per_node" || flag == "--nproc-per-node" || flag == "--nnodes") {
      m.number(flag, value, launch, flag == "--nnodes" ? "nodes" : "per_node");
      continue;
    }
    const std::size_t before = run.mapped.size() + run.unmapped.size();
    map_model(flag, value, m);
    map_parallelism(flag, value, m);
    map_training(flag, value, m);
    if (run.mapped.size() + run.unmapped.size() != before) continue;
    if (no_effect(flag)) run.ignored.push_back(flag);
    else run.unmapped.push_back(fmt::format("{}{} (not modelled)", flag, value.empty() ? "" : " " + value));
  }
  map_recompute_blocks(args, m);
  map_recompute_modules(args, m);
  map_pipeline_split(args, m);
  map_shared_experts(args, m);
  map_latent_attention(args, m);
  map_moe_layers(args, m);
  drop_unheld_grad_reduce(run);
  // Megatron overlaps the distributed optimizer's gather; without that optimizer it asserts
  // (megatron/training/arguments.py, validate_args: "--overlap-param-gather only supported with
  // distributed optimizer").
  if (run.parallelism.value("overlap_param_gather", false) && !run.parallelism.contains("zero_stage")) {
    run.parallelism.erase("overlap_param_gather");
    std::erase(run.mapped, std::string("--overlap-param-gather"));
    run.unmapped.push_back("--overlap-param-gather (needs --use-distributed-optimizer)");
  }
  if (run.model.contains("num_experts") && !run.model.contains("experts_per_token")) run.model["experts_per_token"] = 2;
  // Megatron turns sequence parallelism off without tensor parallelism (arguments.py, validate_args).
  if (run.parallelism.value("sequence_parallel", false) && run.parallelism.value("tensor", 1) <= 1) {
    run.parallelism.erase("sequence_parallel");
    std::erase(run.mapped, std::string("--sequence-parallel"));
    run.ignored.push_back("--sequence-parallel (Megatron disables it at tensor-model-parallel-size 1)");
  }
  if (launch.contains("nodes") && launch.contains("per_node"))
    run.gpus = static_cast<int>(launch["nodes"].get<long long>() * launch["per_node"].get<long long>());
  // A launch script sets some flags in two branches (mock and real data): name each once.
  for (auto* list : {&run.mapped, &run.ignored, &run.unmapped}) {
    std::vector<std::string> once;
    for (const auto& x : *list)
      if (std::find(once.begin(), once.end(), x) == once.end()) once.push_back(x);
    *list = std::move(once);
  }
  return run;
}

}  // namespace dtsim::config
