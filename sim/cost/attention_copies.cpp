#include "sim/cost/attention_copies.hpp"

namespace dtsim::cost {

// Bytes of each kernel (e: the activations' element size; q, kv: this rank's elements of Q and of
// K, V having as many; table: the bytes of the rotary table one rotation reads).
//
// Rotary models, as torchtitan writes Llama 3 (pytorch/torchtitan @b5bcd76):
// - FusedQKVLinear.forward (models/common/attention.py) splits the one QKV output and copies each
//   of q, k, v with .contiguous() (2e each); the split's backward is a cat of dq, dk, dv into the
//   QKV output's gradient (2e over all three).
// - ComplexRoPE.apply_rotary_emb (models/common/rope.py), for q and for k (k with the KV heads):
//   x.float() (reads e, writes 4), the complex multiply by the complex64 table (reads 4, writes 4,
//   and the table), .type_as(x) (reads 4, writes e). Backward the same three: type_as's backward
//   casts the gradient up, the multiply's is grad * table.conj(), float()'s casts it back.
// - GQAttention.forward calls SDPA with enable_gqa (no repeat_kv since torchtitan ff0829c, #2259),
//   and the transposes around it are views: SDPA's flash path runs on (b, s, h, d) and returns its
//   output as a transposed view of that layout, so the output's .contiguous() copies nothing.
// Learned positions (GPT-2 as nanoGPT, Hugging Face's GPT2Attention and scripts/gpu_train.py
// write it): q, k, v are views of the QKV output, so only the split's backward cat runs.
// The casts up to fp32 (x.float(), and backward type_as's of the gradient) widen 16-bit elements.
namespace {

// rotate-half, as HF's apply_rotary_pos_emb writes it (q * cos + rotate_half(q) * sin, cos and sin
// in the activations' type) and scripts/gpu_train.py's rotate(): for each of q and k, n elements
// of a transposed view of the QKV output, forward: -x2 (a strided half: e n/2 each way), the cat
// of (-x2, x1) (2e), x * cos and that cat * sin (2e each, cos and sin broadcast over the heads),
// their sum (3e). Backward: the gradient times cos and times sin (2e each, broadcast); neg's
// backward (a half); each slice's backward zero-fills a whole tensor (e) and copies its half into
// it (a strided half); x's three gradients summed (two adds, 3e). The kernels that read a strided
// half or a broadcast table run on ATen's scalar path (MemoryPass::unvectorised_elems). q, k and v
// are views of the QKV output, so only the split's backward cat copies them.
std::vector<MemoryPass> rotate_half(double e, double n, bool forward) {
  const MemoryPass half{e * n, false, n / 2}, broadcast{2 * e * n, false, n};
  if (forward) return {half, {2 * e * n}, broadcast, broadcast, {3 * e * n}};
  return {broadcast, broadcast, half, {e * n}, half, {e * n}, half, {3 * e * n}, {3 * e * n}};
}

}  // namespace

std::vector<MemoryPass> copy_passes(Copies copies, const models::Kernel& k) {
  const bool forward = k.role == models::KernelRole::FlashForward;
  if (copies == Copies::Fused || (!forward && k.role != models::KernelRole::FlashBackward) || k.io.q <= 0) return {};
  const double e = k.elem_bytes, q = k.io.q, kv = k.io.kv, table = k.io.rope_table;
  const MemoryPass cat{2 * e * (q + 2 * kv)};
  if (table <= 0) return forward ? std::vector<MemoryPass>{} : std::vector<MemoryPass>{cat};
  if (copies == Copies::RotateHalf) {
    std::vector<MemoryPass> passes;
    for (double n : {q, kv})
      for (const auto& p : rotate_half(e, n, forward)) passes.push_back(p);
    if (!forward) passes.push_back(cat);
    return passes;
  }
  std::vector<MemoryPass> passes;
  if (forward) passes = {{2 * e * q}, {2 * e * kv}, {2 * e * kv}};
  for (double n : {q, kv}) passes.insert(passes.end(), {{(e + 4) * n, e < 4}, {8 * n + table}, {(4 + e) * n}});
  if (!forward) passes.push_back(cat);
  return passes;
}

// Inductor (this project's compiled H200 and H100 steps, scripts/gpu_train.py under torch.compile):
// forward, triton_poi_fused_..._cat_mul_neg_slice_split_with_sizes_transpose_view, one for q and one
// for k, reading the strided view of the QKV output and the table and writing the rotated tensor
// (SDPA, an external kernel, does not fuse); backward, triton_poi_fused_add_cat_mul_neg_slice_
// slice_backward_transpose_view, the rotations' backward fused into the cat of dq, dk and dv (GPT-2's
// learned positions: triton_poi_fused_cat_transpose_view, the cat alone). Vectorised pointwise
// kernels: no unvectorised elements.
std::vector<MemoryPass> compiled_copy_passes(const models::Kernel& k) {
  const bool forward = k.role == models::KernelRole::FlashForward;
  if ((!forward && k.role != models::KernelRole::FlashBackward) || k.io.q <= 0) return {};
  const double e = k.elem_bytes, q = k.io.q, kv = k.io.kv, table = k.io.rope_table;
  if (forward) {
    if (table <= 0) return {};
    return {{2 * e * q + table}, {2 * e * kv + table}};
  }
  return {{2 * e * (q + 2 * kv) + 2 * table}};
}

}  // namespace dtsim::cost
