// A torchtitan job config (torchtitan/config/job_config.py: [model], [training], [parallelism],
// [activation_checkpoint], [compile], float8 converters) as dtsim scenario keys.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <toml++/toml.h>

#include "sim/config/import_run.hpp"
#include "sim/core/errors.hpp"

namespace dtsim::config {

namespace {

// torchtitan's llama3 flavors (torchtitan/models/llama3/__init__.py, llama3_configs) and the
// dtsim presets with the same shapes.
const std::map<std::string, std::string>& llama3_presets() {
  static const std::map<std::string, std::string> m{{"8B", "llama-3-8b"}, {"70B", "llama-3-70b"}, {"405B", "llama-3-405b"}};
  return m;
}

struct Reader {
  const toml::table& root;
  ImportedRun& run;
  std::vector<std::string> seen;
  const toml::node* get(const std::string& path) {
    const toml::node* n = root.at_path(path).node();
    if (n) seen.push_back(path);
    return n;
  }
  std::optional<long long> integer(const std::string& path) {
    const auto* n = get(path);
    if (!n) return std::nullopt;
    if (auto v = n->value<long long>()) return v;
    run.unmapped.push_back(fmt::format("{} (not an integer)", path));
    return std::nullopt;
  }
  std::optional<std::string> text(const std::string& path) {
    const auto* n = get(path);
    return n ? n->value<std::string>() : std::nullopt;
  }
  std::optional<bool> boolean(const std::string& path) {
    const auto* n = get(path);
    return n ? n->value<bool>() : std::nullopt;
  }
};

void map_model(Reader& r) {
  const auto name = r.text("model.name").value_or("llama3");
  const auto flavor = r.text("model.flavor");
  if (name == "llama3" && flavor && llama3_presets().count(*flavor)) {
    r.run.model["preset"] = llama3_presets().at(*flavor);
    r.run.mapped.push_back("model.name"), r.run.mapped.push_back("model.flavor");
  } else {
    r.run.unmapped.push_back(fmt::format("model.name {} flavor {} (no dtsim preset: give the model with dtsim import hf)", name,
                                         flavor.value_or("?")));
  }
}

// data_parallel_shard_degree -1 takes the GPUs the other degrees leave: dtsim's default `data`.
void map_parallelism(Reader& r) {
  auto& p = r.run.parallelism;
  p["framework"] = "fsdp";
  const long long replicate = r.integer("parallelism.data_parallel_replicate_degree").value_or(1);
  const long long shard = r.integer("parallelism.data_parallel_shard_degree").value_or(-1);
  const long long tp = r.integer("parallelism.tensor_parallel_degree").value_or(1);
  const long long pp = r.integer("parallelism.pipeline_parallel_degree").value_or(1);
  const long long cp = r.integer("parallelism.context_parallel_degree").value_or(1);
  // torchtitan applies FSDP2 over dp_shard (HSDP when dp_replicate > 1 too), and plain DDP when
  // only dp_replicate > 1 (parallelize_llama: apply_fsdp if dp_shard_enabled, else apply_ddp).
  if (shard > 1 || shard == -1) p["zero_stage"] = 3;
  if (shard > 1 && replicate > 1) p["shard_size"] = shard;
  if (shard == -1 && replicate > 1)
    r.run.unmapped.push_back("parallelism.data_parallel_replicate_degree with data_parallel_shard_degree -1 (give "
                             "parallelism.shard_size: the data-parallel GPUs over the replicate degree)");
  // Inside pipeline stages FSDP2 runs with reshard_after_forward False: dtsim's per-layer ZeRO-3
  // under megatron-lm models that (docs/frameworks.md), the fsdp framework's per-unit model does not.
  if (pp > 1 && (shard > 1 || shard == -1)) {
    p["framework"] = "megatron-lm";
    r.run.unmapped.push_back("parallelism.pipeline_parallel_degree with FSDP (imported with framework megatron-lm: FSDP2 in each "
                             "stage gathered once per step and reduce-scattered after the last backward, without fsdp's per-unit "
                             "host costs)");
  }
  if (tp > 1) p["tensor"] = tp, p["sequence_parallel"] = true;  // torchtitan's TP plan shards norms (SequenceParallel)
  if (pp > 1) p["pipeline"] = pp;
  if (cp > 1) p["context"] = cp;
  if (shard > 0) r.run.gpus = static_cast<int>(std::max(1LL, replicate) * shard * tp * pp * cp);
  for (const char* k : {"data_parallel_replicate_degree", "data_parallel_shard_degree", "tensor_parallel_degree",
                        "pipeline_parallel_degree", "context_parallel_degree"})
    r.run.mapped.push_back(std::string("parallelism.") + k);
  if (r.boolean("parallelism.enable_async_tensor_parallel").value_or(false)) r.run.stack["preset"] = "torchtitan-async-tp";
  if (auto s = r.text("parallelism.pipeline_parallel_schedule")) {
    static const std::map<std::string, std::string> schedules{{"1F1B", "1f1b"}, {"GPipe", "gpipe"}, {"Interleaved1F1B", "interleaved-1f1b"}};
    if (auto it = schedules.find(*s); it != schedules.end()) p["pipeline_schedule"] = it->second, r.run.mapped.push_back("parallelism.pipeline_parallel_schedule");
    else r.run.unmapped.push_back(fmt::format("parallelism.pipeline_parallel_schedule {} (not one of 1F1B, GPipe, Interleaved1F1B)", *s));
  }
}

// selective_ac_option = "n": every n-th block fully checkpointed, the others keep everything
// (activation_checkpoint.py, _apply_layer_sac; 0 and 1 wrap every block).
void map_layer_checkpointing(Reader& r, const std::string& option) {
  auto& p = r.run.parallelism;
  p["recompute"] = "full";
  const bool digits = !option.empty() && std::all_of(option.begin(), option.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits || option.size() > 6) {
    r.run.unmapped.push_back(fmt::format("activation_checkpoint.selective_ac_option {} (neither \"op\" nor a number: imported as full)", option));
    return;
  }
  if (const int n = std::stoi(option); n > 1) p["recompute_every"] = n;
  r.run.mapped.push_back("activation_checkpoint.selective_ac_option");
}

void map_training(Reader& r) {
  auto& t = r.run.training;
  auto& p = r.run.parallelism;
  // Older configs call the per-rank batch `batch_size`, newer ones `local_batch_size`.
  const auto local = r.integer("training.local_batch_size") ? r.integer("training.local_batch_size") : r.integer("training.batch_size");
  if (local) p["micro_batch_size"] = *local, r.run.mapped.push_back("training.local_batch_size");
  // Without a global batch, torchtitan takes local batch x data-parallel ranks: no accumulation.
  if (auto g = r.integer("training.global_batch_size"); g && *g > 0) t["global_batch_size"] = *g, r.run.mapped.push_back("training.global_batch_size");
  else t["gradient_accumulation_steps"] = 1;
  if (auto s = r.integer("training.seq_len")) r.run.model["seq_len"] = *s, r.run.mapped.push_back("training.seq_len");
  if (auto s = r.integer("training.steps")) t["steps"] = *s, r.run.mapped.push_back("training.steps");
  t["precision"] = r.text("training.mixed_precision_param").value_or("bfloat16") == "float32" ? "fp32" : "bf16";
  t["attention"] = "flash";  // torchtitan's llama3 calls SDPA, whose CUDA backend is FlashAttention-2
  const auto mode = r.text("activation_checkpoint.mode").value_or("selective");
  const auto option = r.text("activation_checkpoint.selective_ac_option").value_or("2");
  if (mode == "full") p["recompute"] = "full";
  else if (mode == "none") p["recompute"] = "none";
  else if (option == "op")
    p["recompute"] = "op", r.run.mapped.push_back("activation_checkpoint.selective_ac_option");
  else
    map_layer_checkpointing(r, option);
  r.run.mapped.push_back("activation_checkpoint.mode");
}

void map_stack(Reader& r) {
  // [compile] enable (newer) or training.compile (older).
  const bool compiled = r.boolean("compile.enable").value_or(r.boolean("training.compile").value_or(false));
  if (!r.run.stack.contains("preset")) r.run.stack["preset"] = compiled ? "torchtitan-compile" : "pytorch-eager";
  if (!compiled && r.run.stack["preset"] == "torchtitan-async-tp")
    r.run.unmapped.push_back("parallelism.enable_async_tensor_parallel without compile (torchtitan requires compile for it)");
  if (!compiled) r.run.stack["allocator"] = "pytorch-expandable";  // run_train.sh sets expandable_segments either way
  const auto* conv = r.get("model.converters");
  if (!conv || !conv->is_array() || conv->as_array()->empty()) return;
  // torchao's float8 training: tensorwise scales from each tensor's own amax (its default recipe).
  r.run.training["precision"] = "fp8";
  r.run.training["fp8_recipe"] = "current";
  r.run.mapped.push_back("model.converters");
  // FSDP2 gathers the FP8 GEMMs' weights in FP8 (WeightWithDynamicFloat8CastTensor).
  const bool fsdp = r.run.parallelism.value("framework", std::string()) == "fsdp";
  if (fsdp && r.boolean("float8.enable_fsdp_float8_all_gather").value_or(false)) {
    r.run.parallelism["zero3"]["fp8_all_gather"] = true;
    r.run.mapped.push_back("float8.enable_fsdp_float8_all_gather");
  }
}

}  // namespace

ImportedRun import_torchtitan_toml(const std::string& text, const std::string& file) {
  toml::table root;
  try {
    root = toml::parse(text, file);
  } catch (const toml::parse_error& e) {
    throw InputError(file, fmt::format("line {}", e.source().begin.line), std::string(e.description()));
  }
  ImportedRun run;
  run.framework = "torchtitan";
  Reader r{root, run, {}};
  map_model(r);
  map_parallelism(r);
  map_training(r);
  map_stack(r);
  // Everything else the file sets: ignored where it cannot change time or memory.
  static const std::vector<std::string> no_effect{"job", "profiling", "metrics", "optimizer", "lr_scheduler", "checkpoint",
                                                  "validation", "comm", "experimental", "fault_tolerance"};
  for (const auto& [section, node] : root) {
    const std::string s(section.str());
    if (!node.is_table()) continue;
    for (const auto& [key, value] : *node.as_table()) {
      const std::string path = s + "." + std::string(key.str());
      if (std::find(r.seen.begin(), r.seen.end(), path) != r.seen.end()) continue;
      if (std::find(no_effect.begin(), no_effect.end(), s) != no_effect.end() ||
          path == "model.tokenizer_path" || path == "model.hf_assets_path" || path == "training.dataset" ||
          path == "training.max_norm" || path == "training.dataset_path" || path == "training.warmup_steps")
        run.ignored.push_back(path);
      else if (s != "float8" || value.value_or(false))
        run.unmapped.push_back(path + " (not modelled)");
      else
        run.ignored.push_back(path);
    }
  }
  return run;
}

}  // namespace dtsim::config
