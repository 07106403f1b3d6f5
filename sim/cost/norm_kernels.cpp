#include "sim/cost/norm_kernels.hpp"

namespace dtsim::cost {

namespace {

using models::KernelRole;

// A kernel over `elems` elements moving `bytes_per_elem` each; `unvectorised`: ATen takes its
// scalar path (an operand broadcast along the rows, or a cast between types), bound by elements
// in flight rather than by HBM (MemoryPass::unvectorised_elems).
MemoryPass pass(double bytes_per_elem, double elems, bool unvectorised = false) {
  return {bytes_per_elem * elems, false, unvectorised ? elems : 0.0};
}
// A per-row kernel (add eps, rsqrt and their gradients): a few bytes per row, at the device's
// minimum kernel time.
constexpr MemoryPass kRowKernel{};

}  // namespace

// composite: torchtitan's RMSNorm (torchtitan/models/norms.py @026e23a: x.float(), pow(2), mean,
// + eps, rsqrt, mul, type_as, * weight), nn.RMSNorm up to PyTorch 2.8 (aten rms_norm_symint, the
// same ops, before pytorch/pytorch#153666 gave it a fused CUDA kernel in August 2025) and HF's
// LlamaRMSNorm (the same ops, in every version). Per element, e the activations' size, fp32 4:
// - forward: the cast up (reads e, writes 4; unvectorised), pow (4 + 4), mean over the row
//   (reads 4), + eps and rsqrt (per row), the multiply by the broadcast rsqrt (4 + 4,
//   unvectorised), the cast back (4 + e), the multiply by the broadcast weight (e + e,
//   unvectorised);
// - backward, as autograd runs it: the weight multiply's input gradient (e + e, unvectorised) and
//   its weight gradient (dy times the normalised output, e + e + e, then a sum over tokens, e);
//   type_as's backward casts up (e + 4, unvectorised); the rsqrt multiply's gradients (dy times x,
//   4 + 4 + 4, summed over the row, 4; dy times the broadcast rsqrt, 4 + 4, unvectorised); the
//   rsqrt and add gradients (per row, three kernels); mean's backward expands the row gradient
//   (writes 4, unvectorised); pow's backward (x.pow(1), a copy 4 + 4; times 2, 4 + 4; times the
//   gradient, 4 + 4 + 4); the sum of x's two gradients (4 + 4 + 4); the cast's backward (4 + e).
// This project's H200 ran exactly these kernels in this order for x.float(), pow, mean, rsqrt,
// mul, type_as, mul over 33.5 M bf16 elements (docs/gpu_check/h200-2026-11-28/microbench.json,
// eager "rms_norm_manual", PyTorch 2.11): 0.449 ms forward, 1.436 ms forward and backward.
std::vector<MemoryPass> norm_passes(NormImpl norm, const models::Kernel& k) {
  if (norm != NormImpl::Composite) return {};
  const double e = k.elem_bytes, n = k.elems;
  if (k.role == KernelRole::RmsNormForward)
    return {pass(e + 4, n, true), pass(8, n), pass(4, n), kRowKernel, kRowKernel, pass(8, n, true), pass(4 + e, n),
            pass(2 * e, n, true)};
  if (k.role == KernelRole::RmsNormBackward)
    return {pass(2 * e, n, true), pass(3 * e, n), pass(e, n),  pass(e + 4, n, true), pass(12, n), pass(4, n),
            pass(8, n, true),     kRowKernel,     kRowKernel,  kRowKernel,           pass(4, n, true), pass(8, n),
            pass(8, n),           pass(12, n),    pass(12, n), pass(4 + e, n)};
  return {};
}

}  // namespace dtsim::cost
