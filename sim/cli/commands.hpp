#pragma once
#include <string>

namespace dtsim::cli {

struct RunOptions {
  std::string scenario, out_dir, format = "text";
  bool trace = false;
};

struct ValidateOptions {
  std::string directory, json_out;
  int jobs = 0;
  double max_mean_error = -1, max_error = -1;  // percent; exceeded -> exit 3
};

// Each returns the process exit code (SPEC.md): 0 ok, 1 runtime failure, 2 bad input, 3 regression.
int run(const RunOptions& o);
int memory(const std::string& scenario, const std::string& format);
int list(const std::string& what);
int compare(const std::string& baseline, const std::string& candidate, double rel_tol);
// Published measurements (scenarios with a "reference") against predictions.
int validate(const ValidateOptions& o);

}  // namespace dtsim::cli
