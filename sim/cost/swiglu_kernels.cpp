#include "sim/cost/swiglu_kernels.hpp"

namespace dtsim::cost {

// Per element of the output (n = tokens x ffn), e the activations' size:
// - forward: silu(g) (reads e, writes e), then its product with u (reads 2e, writes e);
// - backward: the product's two gradients, dy * u and dy * silu(g) (3e each), and silu's
//   backward (reads the gradient and g, writes e).
// chunked: g and u are the two halves of one GEMM's output, y.chunk(2, -1) (Megatron-LM's unfused
// path, this project's scripts/gpu_train.py): strided views, so each kernel that reads one runs on
// ATen's scalar path (MemoryPass::unvectorised_elems): silu, the product, dy * u and silu's
// backward; chunk's backward writes both gradients into the GEMM output's (a cat, 2e + 2e).
// separate: g and u come from two GEMMs (torchtitan's FeedForward, w2(silu(w1(x)) * w3(x)); HF's
// LlamaMLP, down_proj(act_fn(gate_proj(x)) * up_proj(x))): contiguous, every kernel vectorised,
// no cat. (Their two input gradients summed into x's, tokens x hidden, are not priced: the model
// keeps one GEMM for both.)
std::vector<MemoryPass> swiglu_passes(Swiglu swiglu, const models::Kernel& k) {
  const double e = k.elem_bytes, n = k.elems;
  const double scalar = swiglu == Swiglu::Chunked ? n : 0.0;
  if (k.role == models::KernelRole::SwiGluForward) return {{2 * e * n, false, scalar}, {3 * e * n, false, scalar}};
  if (k.role != models::KernelRole::SwiGluBackward) return {};
  if (swiglu == Swiglu::Separate) return {{3 * e * n}, {3 * e * n}, {3 * e * n}};
  return {{3 * e * n, false, scalar}, {3 * e * n}, {3 * e * n, false, scalar}, {4 * e * n}};
}

}  // namespace dtsim::cost
