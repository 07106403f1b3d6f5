#pragma once
#include <CLI/CLI.hpp>
#include <string>

// `dtsim import hf config.json -o scenario.json`: a scenario from a Hugging Face model config.
namespace dtsim::cli {

class Import {
 public:
  explicit Import(CLI::App& app);  // adds the subcommand
  int dispatch() const;            // its exit code when chosen, else -1

 private:
  CLI::App* command_ = nullptr;
  std::string kind_, file_, out_, device_ = "h100-sxm-80gb", cluster_ = "dgx-h100";
  int nodes_ = 1;
  long long seq_len_ = 0;
};

}  // namespace dtsim::cli
