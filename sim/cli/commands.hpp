#pragma once
#include <string>

namespace dtsim::cli {

struct RunOptions {
  std::string scenario, out_dir, format = "text";
  bool trace = false;
};

// Each returns the process exit code (SPEC.md): 0 ok, 1 runtime failure, 2 bad input, 3 regression.
int run(const RunOptions& o);
int memory(const std::string& scenario, const std::string& format);
int list(const std::string& what);
int compare(const std::string& baseline, const std::string& candidate, double rel_tol);

}  // namespace dtsim::cli
