#pragma once
// The kernels eager PyTorch runs for an RMSNorm written as ops: the stack's norm mechanism.
#include <vector>

#include "models/model_graph.hpp"
#include "sim/cost/stack.hpp"

namespace dtsim::cost {

// The memory-bound passes, one kernel each, that replace the model's own RMSNorm kernel `k` (an
// RmsNormForward or RmsNormBackward role) under `norm`; empty: the model's kernel as the stack's
// element-wise mode prices it. LayerNorm keeps its one ATen kernel either way.
std::vector<MemoryPass> norm_passes(NormImpl norm, const models::Kernel& k);

}  // namespace dtsim::cost
