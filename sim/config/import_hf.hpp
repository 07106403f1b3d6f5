#pragma once
// `dtsim import hf config.json`: a Hugging Face model config as a dtsim model, family by family
// (Llama, Mistral, Mixtral, Qwen2/3 and their MoE, DeepSeek-V2/V3, GPT-2, ViT). Each config key is
// mapped, ignored because it changes neither time nor memory, or named as not mapped.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dtsim::config {

struct ImportedModel {
  nlohmann::ordered_json model;        // the scenario's "model" object
  std::string family;                  // the config's model_type
  std::vector<std::string> mapped;     // config keys that set the model
  std::vector<std::string> ignored;    // keys with no effect on step time or memory (ids, init, eps...)
  std::vector<std::string> unmapped;   // keys dtsim cannot express: "key (why)"
};

// The config's model; an unknown model_type or a missing size is an InputError naming the file
// and the key.
ImportedModel import_hf_config(const nlohmann::json& config, const std::string& file);

// The model families import_hf_config knows, by model_type.
std::vector<std::string> hf_families();

}  // namespace dtsim::config
