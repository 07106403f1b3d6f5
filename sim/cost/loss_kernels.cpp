#include "sim/cost/loss_kernels.hpp"

namespace dtsim::cost {

// Bytes per logit (e: the logits' element size, n: tokens x vocabulary on this rank).
// eager-fp32: F.cross_entropy(pred.float(), labels), as torchtitan calls it
// (torchtitan/components/loss.py, cross_entropy_loss, commit b5bcd76) and as PyTorch runs it
// (aten/src/ATen/native/LossNLL.cpp: cross_entropy is log_softmax, then nll_loss):
// - forward: the cast to fp32 (reads e, writes 4), log_softmax (reads 4, writes 4, kept for
//   backward); nll_loss reads one entry per token (not priced).
// - backward: nll_loss_backward zero-fills an fp32 gradient of the logits (writes 4) and
//   scatters one entry per token (not priced), log_softmax_backward_data (reads the gradient
//   and the kept output, writes 4), and the cast's backward back to the logits' type (reads
//   4, writes e).
// The model's own kernel (fused) reads the logits once and writes the fp32 softmax forward,
// reads it and writes the logits' gradient backward: e + 4 each way.
std::vector<double> loss_passes(Loss loss, const models::Kernel& k) {
  if (loss != Loss::EagerFp32) return {};
  const double e = k.elem_bytes, n = k.elems;
  if (k.role == models::KernelRole::LossForward) return {(e + 4) * n, 8 * n};
  if (k.role == models::KernelRole::LossBackward) return {4 * n, 12 * n, (4 + e) * n};
  return {};
}

}  // namespace dtsim::cost
