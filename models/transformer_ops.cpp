#include "models/transformer_ops.hpp"

#include <algorithm>

namespace dtsim::models::detail {

Kernel gemm(const std::string& name, I batch, I m, I n, I k, double e, KernelKind kind) {
  Kernel g{name, kind, batch, m, n, k, 0, 0};
  double b = static_cast<double>(batch), M = static_cast<double>(m), N = static_cast<double>(n),
         K = static_cast<double>(k);
  g.flops = 2.0 * b * M * N * K;
  g.bytes = e * b * (M * K + K * N + M * N);
  return g;
}

Kernel memory(const std::string& name, double bytes, double flops) {
  return Kernel{name, KernelKind::Memory, 1, 0, 0, 0, flops, bytes};
}

// A bias's gradient sums dY (tokens x out) over tokens: the stack decides whether that is a kernel.
void mark_bias_grad(Op& op, I tokens, I out, double e) {
  auto& wgrad = op.backward.back();
  wgrad.role = KernelRole::BiasWeightGrad;
  wgrad.elems = static_cast<double>(tokens) * static_cast<double>(out);
  wgrad.elem_bytes = e;
}

// Y[t,out] = X[t,in] W[in,out]: backward is dX = dY W^T and dW = X^T dY; X is saved, split
// `saved_split` ways (sequence parallelism keeps only this rank's tokens of a gathered input).
Op linear(const std::string& name, I tokens, I in, I out, double e, bool bias, double saved_split) {
  Op op;
  op.name = name;
  op.forward = {gemm(name, 1, tokens, out, in, e)};
  op.backward = {gemm(name + ".dgrad", 1, tokens, in, out, e), gemm(name + ".wgrad", 1, in, out, tokens, e)};
  op.backward.back().role = KernelRole::WeightGrad;
  if (bias) mark_bias_grad(op, tokens, out, e);
  op.params = static_cast<double>(in) * static_cast<double>(out) + (bias ? static_cast<double>(out) : 0.0);
  op.tensors = {static_cast<double>(in) * static_cast<double>(out)};
  if (bias) op.tensors.push_back(static_cast<double>(out));
  op.saved_bytes = op.saved_bytes_selective = static_cast<double>(tokens) * static_cast<double>(in) * e / saved_split;
  op.matmul = true;
  op.calls = {{op.forward.front(), static_cast<double>(tokens) * static_cast<double>(out) * e}};
  return op;
}

// Transformer Engine's FP8 linear (te.Linear under fp8_autocast with delayed scaling). Forward casts
// the bf16 input to FP8 in one memory-bound pass (read 2 bytes, write the FP8 copy and, for the
// weight-gradient GEMM, its transpose: Hopper's FP8 GEMMs take only the TN layout), recording its
// amax on the way; the FP8 GEMM reads 1-byte operands and writes bf16. Backward casts the output
// gradient the same way, then runs both gradient GEMMs in FP8 against the cached FP8 weight
// transpose and the saved FP8 input. Each pass also rolls the amax history and recomputes the
// scales of its tensors (input and weight forward, output gradient backward): tiny kernels, one
// per tensor, on a 1024-long fp32 history (Megatron-LM's --fp8-amax-history-len default). With
// current scaling each cast first reads its tensor once more for the amax, and the scale is
// computed from it alone (a tiny kernel, no history). With block scaling each 1 x 128 tile's
// amax is found in the cast's own pass, which writes a 4-byte scale per tile of each copy (the
// row-wise copy and the transposed one, whose tiles run along the other dimension); no scale
// kernel, no history (DeepSeek-V3 report Sec. 3.3.2, "online quantization"; TE's
// Float8BlockQuantizer). MXFP8 casts the same way with an E8M0 byte per 32 elements of each
// copy (TE's MXFP8BlockScaling; OCP Microscaling Formats v1.0), and its GEMMs run at the FP8 rate:
// Blackwell's tensor cores apply the scales. The weights themselves are cast once per step after the optimizer (the optimizer's pass), not per
// micro-batch (TE's is_first_microbatch caching). What backward keeps is the FP8 input.
constexpr double kAmaxHistoryBytes = 1024.0 * 4.0 * 2.0;  // read and write one tensor's history
constexpr double kBlockScaleBytes = 2.0 * 4.0 / 128.0;    // per element: a scale per 128 in each of two copies
constexpr double kMxScaleBytes = 2.0 * 1.0 / 32.0;        // per element: an E8M0 byte per 32 in each of two copies

void to_fp8(Op& op, double in_elems, double out_elems, double gemms, Fp8Scaling scaling) {
  const bool block = scaling == Fp8Scaling::Blockwise;
  auto fp8_gemm = [block](Kernel k) {
    const double M = static_cast<double>(k.m), N = static_cast<double>(k.n), K = static_cast<double>(k.k);
    k.bytes = static_cast<double>(k.batch) * (M * K + K * N + 2.0 * M * N);
    k.fp8 = true;
    k.fp8_block = block;
    return k;
  };
  for (auto* pass : {&op.forward, &op.backward})
    for (auto& k : *pass) k = fp8_gemm(k);
  if (!op.calls.empty()) op.calls.front().kernel = op.forward.front();
  // Casts are memory-bound (no matmul FLOPs: the op's FLOPs stay its GEMMs', as MFU counts them).
  const bool current = scaling == Fp8Scaling::Current, mx = scaling == Fp8Scaling::Mx;
  const double cast = current ? 6.0 : block ? 4.0 + kBlockScaleBytes : mx ? 4.0 + kMxScaleBytes : 4.0;  // bytes per element
  const std::string& name = op.name;
  op.forward.insert(op.forward.begin(), memory(name + ".cast_fp8", in_elems * cast, 0));
  op.backward.insert(op.backward.begin(), memory(name + ".grad.cast_fp8", out_elems * cast, 0));
  if (block || mx) return;
  const double history = current ? 8.0 : kAmaxHistoryBytes;  // per tensor: its scale, or its history
  op.forward.insert(op.forward.begin() + 1, memory(name + ".fp8_scales", 2.0 * history * gemms, 0));
  op.backward.insert(op.backward.begin() + 1, memory(name + ".grad.fp8_scales", history * gemms, 0));
}

Op fp8_linear(const std::string& name, I tokens, I in, I out, bool bias, Fp8Scaling scaling, double saved_split) {
  Op op = linear(name, tokens, in, out, 2.0, bias, saved_split);
  const double T = static_cast<double>(tokens), In = static_cast<double>(in), Out = static_cast<double>(out);
  to_fp8(op, T * In, T * Out, 1.0, scaling);
  op.saved_bytes = op.saved_bytes_selective = T * In / saved_split;
  return op;
}

// Element-wise op over `elems` elements: forward reads `reads` tensors and writes one; backward
// reads the saved input and the incoming gradient and writes one gradient per input.
Op elementwise(const std::string& name, double elems, double e, double reads, double saved, double flops_per_elem) {
  Op op;
  op.name = name;
  op.forward = {memory(name, (reads + 1.0) * elems * e, flops_per_elem * elems)};
  op.backward = {memory(name + ".bwd", (2.0 * reads + 1.0) * elems * e, 2.0 * flops_per_elem * elems)};
  op.saved_bytes = op.saved_bytes_selective = saved;
  return op;
}

void mark_role(Op& op, KernelRole forward, KernelRole backward, double elems, double e, bool dropout) {
  for (auto& k : op.forward) k.role = forward, k.elems = elems, k.elem_bytes = e, k.dropout = dropout;
  for (auto& k : op.backward) k.role = backward, k.elems = elems, k.elem_bytes = e, k.dropout = dropout;
}

void mark_scores(Op& op) {
  for (auto* pass : {&op.forward, &op.backward})
    for (auto& k : *pass) k.scores = true;
}

// Under sequence parallelism `tokens_h` is already this rank's share.
// RMSNorm as ops (o.rms_norm_ops) saves, instead of its input, the fp32 copy the ops square and
// scale (pow's and mul's backward) and the normalised output the weight multiplies (the weight
// gradient's): 4 + e bytes per element (rsqrt's per-row output is not counted).
Op norm(const std::string& name, const TransformerSpec& s, const BuildOptions& o, double tokens_h, double e) {
  const bool rms = s.norm == Norm::RmsNorm;
  const double saved = (rms && o.rms_norm_ops ? 4.0 + e : e) * tokens_h;
  Op op = elementwise(name, tokens_h, e, 1.0, saved, 8.0);
  if (rms) mark_role(op, KernelRole::RmsNormForward, KernelRole::RmsNormBackward, tokens_h, e, false);
  else mark_role(op, KernelRole::NormForward, KernelRole::NormBackward, tokens_h, e, false);
  // Its rows' length, for a stack whose norm kernels run at rates by row (sim/cost/fused_norm_rates.cpp).
  for (auto* pass : {&op.forward, &op.backward})
    for (auto& k : *pass) k.n = s.hidden_size;
  op.params = (s.norm == Norm::LayerNorm ? 2.0 : 1.0) * static_cast<double>(s.hidden_size);
  op.tensors.assign(s.norm == Norm::LayerNorm ? 2 : 1, static_cast<double>(s.hidden_size));  // weight (and bias)
  return op;
}

// Dropout keeps a 1-byte mask per element for backward.
Op dropout_add(const std::string& name, double elems, double e, bool dropout) {
  Op op = elementwise(name, elems, e, 2.0, dropout ? elems : 0.0, dropout ? 3.0 : 1.0);
  mark_role(op, KernelRole::ResidualForward, KernelRole::ResidualBackward, elems, e, dropout);
  return op;
}


// Forward y = max(x, 0)^2: reads x, writes y; 2 FLOPs per element (the max, the square).
// Backward dx = 2 max(x, 0) dy: reads the saved x and dy, writes dx; 3 FLOPs per element.
// Transformer Engine's srelu/dsrelu kernels are these (transformer_engine/common/activation).
Op squared_relu(const std::string& name, double elems, double e) {
  Op op;
  op.name = name;
  op.forward = {memory(name, 2.0 * elems * e, 2.0 * elems)};
  op.backward = {memory(name + ".bwd", 3.0 * elems * e, 3.0 * elems)};
  op.saved_bytes = op.saved_bytes_selective = elems * e;
  mark_role(op, KernelRole::SquaredReluForward, KernelRole::SquaredReluBackward, elems, e, false);
  return op;
}

Slice slice(const TransformerSpec& s, const BuildOptions& o, double e) {
  Slice x{};
  x.b = o.micro_batch;
  x.q = s.seq_len;
  x.h = s.hidden_size;
  x.d = s.head_dim > 0 ? s.head_dim : s.hidden_size / s.num_heads;
  x.heads = s.num_heads / o.tensor;
  x.kv_heads = std::max<I>(1, s.num_kv_heads / o.tensor);  // fewer KV heads than ranks: replicated
  x.ffn = s.ffn_hidden_size / o.tensor;
  x.q_local = x.q / o.context;
  x.tokens = x.b * x.q_local;
  x.t = static_cast<double>(o.tensor);
  x.th = static_cast<double>(x.tokens) * static_cast<double>(x.h);
  x.th_local = o.sequence_parallel ? x.th / x.t : x.th;
  x.e = e;
  x.gathered_split = o.sequence_parallel ? x.t : 1.0;
  x.fp8 = o.fp8;
  x.fp8_scaling = o.fp8_scaling;
  return x;
}

// The linear layer of a block: FP8 under Transformer Engine, else in the activation precision.
Op block_linear(const std::string& name, I tokens, I in, I out, double e, bool bias, const Slice& x, double saved_split) {
  return x.fp8 ? fp8_linear(name, tokens, in, out, bias, x.fp8_scaling, saved_split)
               : linear(name, tokens, in, out, e, bias, saved_split);
}

Op flash_attention(const Kernel& forward, double saved_bytes, double output_bytes) {
  Op fa;
  fa.name = "flash_attention";
  Kernel bw = forward;
  bw.name = "flash_attention.bwd";
  bw.flops = 2.5 * forward.flops;
  bw.bytes = 2.0 * forward.bytes;
  fa.forward = {forward};
  fa.backward = {bw};
  fa.forward.front().role = KernelRole::FlashForward;
  fa.backward.front().role = KernelRole::FlashBackward;
  fa.saved_bytes = fa.saved_bytes_selective = saved_bytes;
  fa.matmul = true;
  fa.calls = {{forward, output_bytes}};
  return fa;
}

void split_calls(Op& op, const std::vector<I>& columns, double e) {
  const Kernel whole = op.calls.front().kernel;
  const double b = static_cast<double>(whole.batch), m = static_cast<double>(whole.m), k = static_cast<double>(whole.k);
  op.calls.clear();
  for (I n : columns) {
    Kernel part = whole;
    part.n = n;
    const double N = static_cast<double>(n);
    part.flops = 2.0 * b * m * N * k;
    // As gemm() and fp8_linear's GEMM count their operands: FP8 inputs, a 2-byte output.
    part.bytes = whole.fp8 ? b * (m * k + k * N + 2.0 * m * N) : e * b * (m * k + k * N + m * N);
    op.calls.push_back({part, b * m * N * e});
  }
}

void standard_attention(Layer& l, I bh, I q, I dqk, I dv, double e, double qk_saved, double v_saved, bool dropout) {
  const double scores = static_cast<double>(bh) * static_cast<double>(q) * static_cast<double>(q);
  Op qk;
  qk.name = "attention.scores";
  qk.forward = {gemm("attention.qk", bh, q, q, dqk, e, KernelKind::Attention)};
  qk.backward = {gemm("attention.qk.dq", bh, q, dqk, q, e, KernelKind::Attention),
                 gemm("attention.qk.dk", bh, q, dqk, q, e, KernelKind::Attention)};
  qk.saved_bytes = qk.saved_bytes_selective = qk_saved;
  mark_scores(qk);
  qk.selective = qk.matmul = true;
  l.ops.push_back(qk);
  Op sm = elementwise("attention.softmax", scores, e, 1.0, scores * e, 5.0);
  sm.saved_bytes_selective = 0;
  sm.selective = true;
  mark_scores(sm);
  l.ops.push_back(sm);
  if (dropout) {
    Op dr = elementwise("attention.dropout", scores, e, 1.0, scores * (1.0 + e), 2.0);
    dr.saved_bytes_selective = 0;
    dr.selective = true;
    mark_scores(dr);
    l.ops.push_back(dr);
  }
  Op pv;
  pv.name = "attention.context";
  pv.forward = {gemm("attention.pv", bh, q, dv, q, e, KernelKind::Attention)};
  pv.backward = {gemm("attention.pv.dp", bh, q, q, dv, e, KernelKind::Attention),
                 gemm("attention.pv.dv", bh, q, dv, q, e, KernelKind::Attention)};
  pv.saved_bytes = pv.saved_bytes_selective = v_saved;  // the probabilities are counted above
  mark_scores(pv);
  pv.matmul = true;
  l.ops.push_back(pv);
}

// Megatron-Core's core_attn module: without it, named modules re-run none of the attention; with
// it the standard attention re-runs its scores as Korthikanti's selective recompute does, and a
// fused attention runs again too, keeping only its inputs (its output and log-sum-exp dropped).
void core_attention_recompute(Layer& l, std::size_t from, const BuildOptions& o, double inputs) {
  using namespace recompute_module;
  if (!(o.recompute_modules & kGiven)) return;
  for (std::size_t i = from; i < l.ops.size(); ++i) {
    Op& op = l.ops[i];
    const bool fused = !op.calls.empty() && op.calls.front().kernel.kind == KernelKind::Attention;
    if (!(o.recompute_modules & kCoreAttn)) {
      op.selective = false;
      op.saved_bytes_selective = op.saved_bytes;
    } else if (fused) {
      op.selective = true;
      op.saved_bytes_selective = inputs;
    }
  }
}

}  // namespace dtsim::models::detail
