#pragma once
// The element-wise kernels a framework launches for a block's norm, activation, dropout and
// residual, and its bias gradients: the stack's element-wise mechanism.
#include <vector>

#include "models/model_graph.hpp"
#include "sim/cost/stack.hpp"

namespace dtsim::cost {

// What runs for one model kernel: the kernel itself as the model prices it (`keep`), or not,
// and memory-bound passes of these bytes, one kernel each.
struct ElementPlan {
  bool keep = true;
  std::vector<double> passes;
};

// `bias_in_gemm`: the fused kernels' bias gradient is summed inside the weight-gradient GEMM (Stack::bias_grad_in_gemm).
ElementPlan element_plan(Elementwise mode, const models::Kernel& k, bool bias_in_gemm = false);

}  // namespace dtsim::cost
