#pragma once
#include <CLI/CLI.hpp>
#include <string>

// `dtsim describe [KEY]`: what a scenario or device profile key is, from the loader's own reads.
namespace dtsim::cli {

class Describe {
 public:
  explicit Describe(CLI::App& app);  // adds the subcommand
  int dispatch() const;              // its exit code when chosen, else -1

 private:
  CLI::App* command_ = nullptr;
  std::string key_;
  std::string format_ = "text";
};

}  // namespace dtsim::cli
