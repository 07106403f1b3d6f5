#pragma once
// The kernels of one optimizer step over a shard of parameters, as the framework runs it.
#include <vector>

#include "models/model_graph.hpp"
#include "strategies/spec.hpp"

namespace dtsim::strategies {

// A copy of `elems` 16-bit gradients into fp32 (reads 2 bytes each, writes 4), priced at the
// device's cast-up rate (KernelRole::CastUp).
models::Kernel grad_cast_kernel(const char* name, double elems);

// Whether the step first casts 16-bit gradients up to fp32 (update_kernels.cpp says where).
bool update_casts_gradients(const ParallelismSpec& p, Precision t);

// The optimizer's update of `params` parameters, preceded by that cast where the framework runs it.
std::vector<models::Kernel> update_kernels(const ParallelismSpec& p, const TrainingSpec& t, double params);

}  // namespace dtsim::strategies
