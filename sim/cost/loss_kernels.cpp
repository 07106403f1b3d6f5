#include "sim/cost/loss_kernels.hpp"

#include <algorithm>
#include <cmath>

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
// compiled: Inductor fuses the cast, log_softmax and nll_loss into one reduction each way (the
// compiled H100 Llama step's profile: triton_red_fused__log_softmax__to_copy_..._prepare_softmax_online
// forward, ..._log_softmax_backward_data_..._nll_... backward): forward reads the logits (e),
// backward reads them again and writes their gradient (2e), the softmax recomputed in registers.
// The model's own kernel (fused) reads the logits once and writes the fp32 softmax forward,
// reads it and writes the logits' gradient backward: e + 4 each way.
// Inductor's forward reduction streams its logits well below a copy's rate, the less so the longer
// the row: torch.compile's cross-entropy forward (PyTorch 2.7.1, bf16, H100 SXM) moves 1,700 GB/s
// over rows of 32K and 1,226 GB/s over 131K (Dao-AILab/quack README figure, memory_bound.json
// mem-042 and mem-043), against the 2.97 TB/s the H100 profile streams at (its memory_efficiency
// max): as that share of the device's streaming rate, linear in log row length between the two,
// flat beyond. A check, not a fit: the compiled Llama 3 8B H100 step's forward reduction over
// 128,256 words ran at 1.46 TB/s (docs/gpu_check.md).
double compiled_forward_share(double row) {
  constexpr double short_row = 32768, long_row = 131072;
  constexpr double short_share = 1700.0 / 2970.0, long_share = 1226.0 / 2970.0;
  const double x = std::clamp(std::log(std::max(row, 1.0) / short_row) / std::log(long_row / short_row), 0.0, 1.0);
  return short_share + x * (long_share - short_share);
}

std::vector<MemoryPass> loss_passes(Loss loss, const models::Kernel& k) {
  const double e = k.elem_bytes, n = k.elems;
  if (loss == Loss::Compiled) {
    // As bytes at the device's streaming rate.
    if (k.role == models::KernelRole::LossForward) return {{e * n / compiled_forward_share(static_cast<double>(k.n))}};
    if (k.role == models::KernelRole::LossBackward) return {{2 * e * n}};
    return {};
  }
  if (loss != Loss::EagerFp32) return {};
  // The forward's cast of 16-bit logits to fp32 widens (the backward's cast back narrows).
  if (k.role == models::KernelRole::LossForward) return {{(e + 4) * n, e < 4}, {8 * n}};
  if (k.role == models::KernelRole::LossBackward) return {{4 * n}, {12 * n}, {(4 + e) * n}};
  return {};
}

}  // namespace dtsim::cost
