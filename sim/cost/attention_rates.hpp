#pragma once
// Attention-kernel rates on H100 SXM5 by implementation, head dim, causal mask and sequence length,
// published (attention.json) or, for PyTorch's SDPA flash backend, timed by this project on an
// H200 of the same peak: the stack's attention mechanism.
#include "sim/cost/stack.hpp"

namespace dtsim::cost {

// Whether `impl` runs FlashAttention-2's kernels: the flash-attn package's, or the copy PyTorch
// vendors as SDPA's flash backend (the same launch, the same GQA backward).
inline bool flash_attention_2(AttentionImpl impl) { return impl == AttentionImpl::Flash2 || impl == AttentionImpl::SdpaFlash; }

// TFLOP/s in FlashAttention's convention: forward 4·b·h·s²·d, halved when causal; backward 2.5x
// forward. Linear in log sequence length between the published 512..16k points and in log head
// dim between 64, 128 and 256; flat beyond. 0 for gemm-curve.
double flash_forward_tflops(AttentionImpl impl, double head_dim, bool causal, double seq);
double flash_backward_tflops(AttentionImpl impl, double head_dim, bool causal, double seq);

// How much faster than the H100 SXM5 tables above the A100 SXM4 runs the kernel: the ratio of the
// two GPUs' published forward + backward rates at this shape (FlashAttention-2's for the fused
// implementations, PyTorch's standard attention for sdpa-math), which scales the forward and the
// backward alike.
double a100_over_h100(AttentionImpl impl, double head_dim, bool causal, double seq);

// Seconds per attention score (a query-key pair the kernel computes) that dropout on the
// probabilities adds to the fused kernel, on an H100-class device; 0 where not measured.
double flash_dropout_seconds_per_score(AttentionImpl impl, bool backward);

}  // namespace dtsim::cost
