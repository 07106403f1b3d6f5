#pragma once
// `dtsim import megatron|torchtitan|deepspeed FILE`: the settings a training framework's own
// config gives (parallelism, precision, recompute, schedule, ZeRO, and the model where the config
// holds it) as the parts of a dtsim scenario. Every setting read is mapped, ignored because it
// changes neither step time nor memory, or named as not mapped with the reason.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dtsim::config {

struct ImportedRun {
  std::string framework;  // megatron, torchtitan or deepspeed
  // The scenario's objects; `model` is empty when the config does not describe one (DeepSpeed).
  nlohmann::ordered_json model = nlohmann::ordered_json::object(), parallelism = nlohmann::ordered_json::object(),
                         training = nlohmann::ordered_json::object(), stack = nlohmann::ordered_json::object();
  int gpus = 0;  // the world size where the config fixes it; 0: not given
  std::vector<std::string> mapped, ignored, unmapped;
};

// Megatron-LM / NeMo command-line arguments: a launch script or a file of arguments. Simple shell
// assignments (NAME=value, NAME=${X:-default}) are substituted into the arguments; nothing is run.
ImportedRun import_megatron_args(const std::string& text, const std::string& file);
// A torchtitan job config (TOML).
ImportedRun import_torchtitan_toml(const std::string& text, const std::string& file);
// A DeepSpeed config (JSON).
ImportedRun import_deepspeed_config(const nlohmann::json& config, const std::string& file);

}  // namespace dtsim::config
