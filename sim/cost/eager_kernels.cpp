#include "sim/cost/eager_kernels.hpp"

namespace dtsim::cost {

namespace {

using models::KernelRole;

// Bytes each kernel moves, per element of the role's tensor (e: its element size; a dropout
// mask is 1 byte per element). PyTorch eager (ATen, the CUDA kernels of 2.x):
// - LayerNorm/RMSNorm forward: one kernel, reads x, writes y (native_layer_norm,
//   aten/src/ATen/native/cuda/layer_norm_kernel.cu; F.rms_norm's fused CUDA kernel, same file).
// - their backward: the input gradient (reads x and dy, writes dx) and a second kernel summing the
//   weight (and bias) gradients over tokens (GammaBetaBackward, reads x and dy).
// - GELU: one kernel each way (GeluCUDAKernelImpl / GeluBackwardCUDAKernelImpl, reads 1 and 2).
// - SwiGLU: its own mechanism, the stack's `swiglu` (swiglu_kernels.cpp).
// - squared ReLU as Megatron-LM writes it, torch.pow(F.relu(x), 2) (megatron/core/activations.py,
//   run eager): relu (reads x, writes r) and pow (reads r, writes y); backward: pow_backward's
//   grad * (2 * r.pow(1)) (torch/csrc/autograd/FunctionsManual.cpp: a copy, a scale, a multiply
//   by the gradient) and relu's threshold_backward (reads the gradient and r).
// - x + dropout(y): native_dropout (reads y, writes out and the bool mask), then add; backward:
//   native_dropout_backward (reads grad and mask) and the add that sums the residual's two
//   gradients, as autograd accumulates a tensor used twice.
// - a linear layer's bias gradient: addmm's backward sums dY over tokens (grad.sum(0)), a
//   reduction that reads dY.
std::vector<double> eager_passes(const models::Kernel& k) {
  const double e = k.elem_bytes, n = k.elems;
  switch (k.role) {
    case KernelRole::NormForward:
    case KernelRole::RmsNormForward: return {2 * e * n};
    case KernelRole::NormBackward:
    case KernelRole::RmsNormBackward: return {3 * e * n, 2 * e * n};
    case KernelRole::GeluForward: return {2 * e * n};
    case KernelRole::GeluBackward: return {3 * e * n};
    case KernelRole::SquaredReluForward: return {2 * e * n, 2 * e * n};
    case KernelRole::SquaredReluBackward: return {2 * e * n, 2 * e * n, 3 * e * n, 3 * e * n};
    case KernelRole::ResidualForward:
    case KernelRole::ResidualBackward:
      if (k.dropout) return {(2 * e + 1) * n, 3 * e * n};
      return {3 * e * n};
    default: return {};
  }
}

}  // namespace

ElementPlan element_plan(Elementwise mode, const models::Kernel& k, bool bias_in_gemm) {
  const bool bias = k.role == KernelRole::BiasWeightGrad;
  const double bias_pass = k.elem_bytes * k.elems;  // reads dY once
  // Fused kernels (Megatron-LM's, the model's own) leave a bias's gradient to autograd's sum over
  // tokens unless the GEMM's epilogue sums it.
  if (mode == Elementwise::Fused) return bias && !bias_in_gemm ? ElementPlan{true, {bias_pass}} : ElementPlan{};
  if (mode == Elementwise::Eager) {
    if (bias) return {true, {bias_pass}};
    auto passes = eager_passes(k);
    if (passes.empty()) return {};
    return {false, passes};
  }
  // torch.compile (Inductor) fuses each chain of pointwise ops into one kernel: the model's fused
  // kernel, as it counts it. A reduction over tokens does not fuse with row-wise kernels (the
  // scheduler fuses nodes over the same iteration ranges), so a norm's weight gradient and a bias
  // gradient stay kernels of their own.
  if (bias) return {true, {bias_pass}};
  if (k.role == KernelRole::NormBackward || k.role == KernelRole::RmsNormBackward) return {true, {2 * k.elem_bytes * k.elems}};
  // A residual add without dropout feeds the next norm, and Inductor fuses it into that norm's
  // kernel (triton_red_fused__fused_rms_norm__unsafe_view_add and its backward in this project's
  // compiled steps): forward the norm kernel reads both addends and writes the sum beside its
  // output (2e more than the norm alone), backward it reads the skip connection's gradient too and
  // writes the sum (e more). What is left of the add is those bytes, as a pass of its own.
  if (!k.dropout && k.role == KernelRole::ResidualForward) return {false, {2 * k.elem_bytes * k.elems}};
  if (!k.dropout && k.role == KernelRole::ResidualBackward) return {false, {k.elem_bytes * k.elems}};
  return {};
}

}  // namespace dtsim::cost
