// A DeepSpeed config (deepspeed/runtime/config.py and zero/config.py: batch sizes, fp16/bf16,
// zero_optimization and its stage-3 knobs, activation checkpointing) as dtsim scenario keys.
#include <fmt/format.h>

#include <map>

#include "sim/config/import_run.hpp"
#include "sim/core/errors.hpp"

namespace dtsim::config {

namespace {

using Json = nlohmann::json;

struct Mapper {
  ImportedRun& run;
  // A number, or "auto" (the Hugging Face Trainer fills it in at launch: dtsim cannot know it).
  std::optional<double> number(const Json& obj, const std::string& key, const std::string& path) {
    if (!obj.contains(key)) return std::nullopt;
    const Json& v = obj.at(key);
    if (v.is_number()) {
      run.mapped.push_back(path);
      return v.get<double>();
    }
    run.unmapped.push_back(fmt::format("{} {} (not a number; \"auto\" is set by the Hugging Face Trainer at launch)", path, v.dump()));
    return std::nullopt;
  }
  bool enabled(const Json& obj, const std::string& key) {
    if (!obj.contains(key) || !obj.at(key).is_object()) return false;
    const Json& e = obj.at(key).value("enabled", Json(false));
    return e.is_boolean() && e.get<bool>();
  }
};

void map_batch(const Json& c, Mapper& m) {
  auto& p = m.run.parallelism;
  auto& t = m.run.training;
  const auto micro = m.number(c, "train_micro_batch_size_per_gpu", "train_micro_batch_size_per_gpu");
  const auto accum = m.number(c, "gradient_accumulation_steps", "gradient_accumulation_steps");
  const auto global = m.number(c, "train_batch_size", "train_batch_size");
  if (micro) p["micro_batch_size"] = static_cast<long long>(*micro);
  if (global) t["global_batch_size"] = static_cast<long long>(*global);
  // train_batch_size = micro x accumulation x data-parallel GPUs (DeepSpeed checks it).
  if (micro && accum && global && *micro * *accum > 0) m.run.gpus = static_cast<int>(*global / (*micro * *accum));
  if (!micro && accum && global && !p.contains("micro_batch_size"))
    m.run.unmapped.push_back("train_micro_batch_size_per_gpu (missing: dtsim takes micro-batch 1; DeepSpeed derives it from the GPU count)");
}

void map_precision(const Json& c, Mapper& m) {
  if (m.enabled(c, "bf16")) m.run.training["precision"] = "bf16", m.run.mapped.push_back("bf16");
  else if (m.enabled(c, "fp16")) m.run.training["precision"] = "fp16", m.run.mapped.push_back("fp16");
  else m.run.training["precision"] = "fp32";
}

// ZeRO-3's knobs map one to one onto parallelism.zero3 (docs/frameworks.md).
void map_zero3(const Json& z, Mapper& m) {
  auto& zero3 = m.run.parallelism["zero3"];
  zero3 = nlohmann::ordered_json::object();
  static const std::vector<std::pair<std::string, const char*>> knobs{
      {"stage3_prefetch_bucket_size", "prefetch_bucket_params"},
      {"stage3_max_live_parameters", "max_live_params"},
      {"stage3_max_reuse_distance", "max_reuse_distance_params"},
      {"stage3_param_persistence_threshold", "persistence_threshold_params"},
      {"reduce_bucket_size", "reduce_bucket_params"}};
  for (const auto& [theirs, ours] : knobs)
    if (auto v = m.number(z, theirs, "zero_optimization." + theirs)) zero3[ours] = *v;
}

void map_zero(const Json& c, Mapper& m) {
  if (!c.contains("zero_optimization") || !c.at("zero_optimization").is_object()) return;
  const Json& z = c.at("zero_optimization");
  auto& p = m.run.parallelism;
  std::vector<std::string> seen{"stage"};
  if (auto stage = m.number(z, "stage", "zero_optimization.stage")) p["zero_stage"] = static_cast<int>(*stage);
  if (p.value("zero_stage", 0) == 3) {
    map_zero3(z, m);
    for (const char* k : {"stage3_prefetch_bucket_size", "stage3_max_live_parameters", "stage3_max_reuse_distance",
                          "stage3_param_persistence_threshold", "reduce_bucket_size"})
      seen.push_back(k);
  }
  const auto device_of = [&](const char* key) {
    return z.contains(key) && z.at(key).is_object() && z.at(key).value("device", std::string("none")) != "none";
  };
  if (device_of("offload_optimizer") || z.value("cpu_offload", false)) {
    p["offload_optimizer"] = true;
    m.run.mapped.push_back(z.contains("cpu_offload") ? "zero_optimization.cpu_offload" : "zero_optimization.offload_optimizer");
  }
  seen.insert(seen.end(), {"offload_optimizer", "cpu_offload"});
  static const std::vector<std::string> no_effect{"contiguous_gradients", "overlap_comm", "allgather_partitions",
                                                  "reduce_scatter", "round_robin_gradients", "sub_group_size",
                                                  "stage3_gather_16bit_weights_on_model_save",
                                                  "gather_16bit_weights_on_model_save", "cpu_offload_use_pin_memory",
                                                  "elastic_checkpoint", "allgather_bucket_size"};
  for (const auto& [key, value] : z.items()) {
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
    if (std::find(no_effect.begin(), no_effect.end(), key) != no_effect.end())
      m.run.ignored.push_back("zero_optimization." + key);
    else
      m.run.unmapped.push_back(fmt::format("zero_optimization.{} (not modelled{})", key,
                                           key == "offload_param" || key == "cpu_offload_params" ? ": parameters stay on the GPU" : ""));
  }
}

// data_types.grad_accum_dtype (runtime/engine.py: get_data_types, _do_optimizer_sanity_check). bf16
// weights with fp32 accumulation under ZeRO-1, without offload, run BF16_Optimizer rather than
// ZeRO-1's optimizer: dtsim models BF16_Optimizer as bf16 with zero_stage 0
// (strategies/units/bf16_optimizer.cpp), so the import writes that. Without ZeRO, bf16 accumulation
// is refused by DeepSpeed ("enable ZeRO to use Bfloat16 gradient accumulation"); fp32 there, and
// the weights' own dtype under ZeRO, are what DeepSpeed takes when the key is absent.
void map_data_types(const Json& c, Mapper& m) {
  if (!c.contains("data_types")) return;
  const Json& types = c.at("data_types");
  if (!types.is_object()) return m.run.unmapped.push_back("data_types (not an object)");
  for (const auto& [key, value] : types.items()) {
    const std::string path = "data_types." + key;
    if (key != "grad_accum_dtype" || !value.is_string()) {
      m.run.unmapped.push_back(path + " (not modelled)");
      continue;
    }
    const std::string v = value.get<std::string>();
    const bool fp32 = v == "fp32" || v == "float32" || v == "float", bf16 = v == "bf16" || v == "bfloat16";
    const bool bf16_weights = m.run.training.value("precision", std::string()) == "bf16";
    const int stage = m.run.parallelism.value("zero_stage", 0);
    const bool offload = m.run.parallelism.value("offload_optimizer", false);
    if (bf16_weights && fp32 && stage == 1 && !offload) {
      m.run.parallelism["zero_stage"] = 0;
      m.run.mapped.push_back(path + " (fp32 under bf16 and ZeRO-1: DeepSpeed runs BF16_Optimizer, written as zero_stage 0)");
    } else if (bf16_weights && ((fp32 && stage == 0) || (bf16 && stage >= 1))) {
      m.run.mapped.push_back(path);  // what DeepSpeed takes without the key
    } else if (bf16_weights && bf16 && stage == 0) {
      m.run.unmapped.push_back(path + " (DeepSpeed refuses bf16 accumulation without ZeRO)");
    } else {
      m.run.unmapped.push_back(path + " (not modelled)");
    }
  }
}

}  // namespace

ImportedRun import_deepspeed_config(const nlohmann::json& c, const std::string& file) {
  if (!c.is_object()) throw InputError(file, "", "a DeepSpeed config is a JSON object");
  ImportedRun run;
  run.framework = "deepspeed";
  run.parallelism["framework"] = "deepspeed";
  Mapper m{run};
  map_batch(c, m);
  map_precision(c, m);
  map_zero(c, m);
  map_data_types(c, m);
  if (c.contains("activation_checkpointing")) run.parallelism["recompute"] = "full", run.mapped.push_back("activation_checkpointing");
  static const std::vector<std::string> handled{"train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "train_batch_size",
                                                "bf16", "fp16", "zero_optimization", "activation_checkpointing", "data_types"};
  static const std::vector<std::string> no_effect{"steps_per_print", "wall_clock_breakdown", "gradient_clipping", "optimizer",
                                                  "scheduler", "zero_allow_untested_optimizer", "tensorboard", "wandb",
                                                  "csv_monitor", "flops_profiler", "prescale_gradients", "gradient_predivide_factor",
                                                  "zero_force_ds_cpu_optimizer", "comms_logger"};
  for (const auto& [key, value] : c.items()) {
    if (std::find(handled.begin(), handled.end(), key) != handled.end()) continue;
    if (std::find(no_effect.begin(), no_effect.end(), key) != no_effect.end()) run.ignored.push_back(key);
    else run.unmapped.push_back(key + " (not modelled)");
  }
  return run;
}

}  // namespace dtsim::config
