#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

// `dtsim calibrate`: what a user measured (nccl-tests tables, GEMM and attention microbenchmark
// CSVs, a PyTorch profiler trace, step times) against dtsim's models; writes calibrated device
// and cluster profiles that scenarios name by path, and the residuals (docs/calibrate.md).
namespace dtsim::cli {

class Calibrate {
 public:
  explicit Calibrate(CLI::App& app);  // adds the subcommand
  int dispatch() const;               // its exit code when chosen, else -1

 private:
  CLI::App* command_ = nullptr;
  std::string base_device_, base_cluster_, out_, trace_, steps_, scenario_, stack_;
  std::vector<std::string> nccl_, gemm_, attention_;
};

}  // namespace dtsim::cli
