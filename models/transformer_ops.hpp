#pragma once
// The building blocks of a transformer layer's op list, shared by the dense and the
// mixture-of-experts / latent-attention parts of models/transformer*.cpp. Internal to models/.
#include <cstdint>
#include <string>
#include <vector>

#include "models/model_graph.hpp"

namespace dtsim::models::detail {

using I = std::int64_t;

Kernel gemm(const std::string& name, I batch, I m, I n, I k, double e, KernelKind kind = KernelKind::Gemm);
Kernel memory(const std::string& name, double bytes, double flops);
// Y[t,out] = X[t,in] W[in,out]; X is saved split `saved_split` ways (sequence parallelism keeps
// only this rank's tokens of a gathered input).
Op linear(const std::string& name, I tokens, I in, I out, double e, bool bias, double saved_split = 1.0);
// Transformer Engine's FP8 linear (see transformer_ops.cpp).
Op fp8_linear(const std::string& name, I tokens, I in, I out, bool bias, Fp8Scaling scaling, double saved_split = 1.0);
// Turns a linear op's GEMMs (`gemms` of them in one grouped kernel, each with its own scales) into
// Transformer Engine's FP8 ones, with the casts of its `in_elems` input and `out_elems` output
// gradient elements and the amax bookkeeping (fp8_linear's comment).
void to_fp8(Op& op, double in_elems, double out_elems, double gemms, Fp8Scaling scaling);
// Element-wise op over `elems` elements reading `reads` tensors and keeping `saved` bytes.
Op elementwise(const std::string& name, double elems, double e, double reads, double saved, double flops_per_elem);
void mark_scores(Op& op);
// Marks a linear op's weight-gradient GEMM as also yielding its bias gradient (dY of tokens x out).
void mark_bias_grad(Op& op, I tokens, I out, double e);
// Tags an op's kernels with their roles for the software stack's pricing (sim/cost/stack.hpp).
void mark_role(Op& op, KernelRole forward, KernelRole backward, double elems, double e, bool dropout);
Op norm(const std::string& name, const TransformerSpec& s, const BuildOptions& o, double tokens_h, double e);
Op dropout_add(const std::string& name, double elems, double e, bool dropout);
// relu(x)^2 over `elems` elements, as one fused kernel each way.
Op squared_relu(const std::string& name, double elems, double e);

// Shapes of one tensor-parallel rank's slice of a block.
struct Slice {
  I b, q, h, d, heads, kv_heads, ffn, tokens;
  I q_local;  // query positions this context-parallel rank holds (q: all the keys it attends over)
  double t, th, th_local, e;  // th_local: tokens x hidden this rank keeps under sequence parallelism
  double gathered_split;      // how many ways a gathered GEMM input is saved split
  bool fp8;                   // the block's linear layers in FP8 (BuildOptions::fp8)
  Fp8Scaling fp8_scaling;     // ... scaled as the recipe says (BuildOptions::fp8_scaling)
};

Slice slice(const TransformerSpec& s, const BuildOptions& o, double e);
// The linear layer of a block: FP8 under Transformer Engine, else in the activation precision.
Op block_linear(const std::string& name, I tokens, I in, I out, double e, bool bias, const Slice& x, double saved_split = 1.0);

// Fused attention (FlashAttention) from its forward kernel: backward recomputes the scores,
// hence 2.5x the forward's matmul work, and reads and writes twice its bytes. `output_bytes`: what
// it returns (O and the log-sum-exp).
Op flash_attention(const Kernel& forward, double saved_bytes, double output_bytes);
// A linear op's one GEMM as the separate matmuls of `columns` output columns each (a fused QKV as
// wq, wk, wv), with outputs of `e` bytes per value.
void split_calls(Op& op, const std::vector<I>& columns, double e);

// Attention without fusion: scores Q.K^T (keeping `qk_saved` bytes), softmax, optional dropout,
// then probabilities.V (keeping `v_saved`), over `bh` batch-heads of `q` positions.
void standard_attention(Layer& l, I bh, I q, I dqk, I dv, double e, double qk_saved, double v_saved, bool dropout);

// Megatron-Core's core_attn recompute module (BuildOptions::recompute_modules) over the core
// attention's ops [from, end): `inputs` the bytes of Q, K and V a fused call keeps when it is
// checkpointed.
void core_attention_recompute(Layer& l, std::size_t from, const BuildOptions& o, double inputs);

// Multi-head latent attention and mixture-of-experts MLPs (transformer_moe.cpp).
void mla_ops(Layer& l, const TransformerSpec& s, const BuildOptions& o, const Slice& x);
void moe_ops(Layer& l, const TransformerSpec& s, const BuildOptions& o, const Slice& x);

}  // namespace dtsim::models::detail
