#pragma once
// Where one GPU's kernel time goes, by what each kernel is for: GEMMs, attention, norms, ... as
// the device and the scenario's software stack price them (`dtsim run --kernels`).
#include <string>
#include <vector>

#include "sim/results/result.hpp"

namespace dtsim::results {

struct KernelGroup {
  std::string name;
  double kernels = 0;  // the model's kernels (a stack may launch several for one)
  double seconds = 0;  // their GPU time in one step, before what overlapped collectives take
};

// GPU `rank`'s compute and optimizer tasks of one step, their kernels grouped by role; groups
// with no kernel are left out, the rest in a fixed order.
std::vector<KernelGroup> kernel_view(const Result& r, int rank);

}  // namespace dtsim::results
