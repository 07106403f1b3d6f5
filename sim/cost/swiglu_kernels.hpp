#pragma once
// The kernels eager PyTorch runs for SwiGLU, silu(gate) * up: the stack's SwiGLU mechanism.
#include <vector>

#include "models/model_graph.hpp"
#include "sim/cost/stack.hpp"

namespace dtsim::cost {

// The memory-bound passes, one kernel each, that replace the model's SwiGLU kernel `k` (a
// SwiGluForward or SwiGluBackward role) under an eager stack; empty for any other kernel.
std::vector<MemoryPass> swiglu_passes(Swiglu swiglu, const models::Kernel& k);

}  // namespace dtsim::cost
