#pragma once
#include <CLI/CLI.hpp>
#include <string>

// `dtsim import hf config.json -o scenario.json`: a scenario from a Hugging Face model config;
// `dtsim import megatron|torchtitan|deepspeed FILE -o scenario.json`: from a training framework's
// own config (the model from the config, --model PRESET or --hf config.json).
namespace dtsim::cli {

class Import {
 public:
  explicit Import(CLI::App& app);  // adds the subcommand
  int dispatch() const;            // its exit code when chosen, else -1

 private:
  CLI::App* command_ = nullptr;
  std::string kind_, file_, out_, device_ = "h100-sxm-80gb", cluster_ = "dgx-h100";
  std::string model_, hf_;
  int nodes_ = 0;
  long long seq_len_ = 0;
  int import_run() const;
};

}  // namespace dtsim::cli
