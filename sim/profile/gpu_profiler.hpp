#pragma once
#include <string>
#include <vector>

#include "models/model_graph.hpp"
#include "sim/cost/kernel_table.hpp"
#include "sim/profile/cpu_profiler.hpp"

// Times a model's kernels on the machine's NVIDIA GPU (cuBLAS GEMMs in `dtype`, a CUDA streaming
// kernel for memory-bound ones) into a kernel table, as profile_cpu does with Eigen.
namespace dtsim::profile {

// Whether a GPU can be profiled here; `why` says why not.
bool gpu_available(std::string& why);

// The largest stream timed: longer memory-bound kernels (an optimizer step over billions of
// parameters moves tens of GB) are timed over this many bytes and their time scaled, as the
// rate no longer changes at these sizes.
inline constexpr double kGpuMaxStreamBytes = 4.0 * 1024 * 1024 * 1024;

cost::KernelTable profile_gpu(const std::vector<models::Kernel>& kernels, const std::string& dtype, const Options& o);

}  // namespace dtsim::profile
