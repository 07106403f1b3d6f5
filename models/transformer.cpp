#include "models/model_graph.hpp"

#include <algorithm>
#include <cmath>

namespace dtsim::models {

namespace {

using I = std::int64_t;

Kernel gemm(const std::string& name, I batch, I m, I n, I k, double e, KernelKind kind = KernelKind::Gemm) {
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

// Y[t,out] = X[t,in] W[in,out]: backward is dX = dY W^T and dW = X^T dY; X is saved, split
// `saved_split` ways (sequence parallelism keeps only this rank's tokens of a gathered input).
Op linear(const std::string& name, I tokens, I in, I out, double e, bool bias, double saved_split = 1.0) {
  Op op;
  op.name = name;
  op.forward = {gemm(name, 1, tokens, out, in, e)};
  op.backward = {gemm(name + ".dgrad", 1, tokens, in, out, e), gemm(name + ".wgrad", 1, in, out, tokens, e)};
  op.params = static_cast<double>(in) * static_cast<double>(out) + (bias ? static_cast<double>(out) : 0.0);
  op.saved_bytes = op.saved_bytes_selective = static_cast<double>(tokens) * static_cast<double>(in) * e / saved_split;
  op.matmul = true;
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
// computed from it alone (a tiny kernel, no history). The weights themselves are cast once per step after the optimizer (the optimizer's pass), not per
// micro-batch (TE's is_first_microbatch caching). What backward keeps is the FP8 input.
constexpr double kAmaxHistoryBytes = 1024.0 * 4.0 * 2.0;  // read and write one tensor's history

Op fp8_linear(const std::string& name, I tokens, I in, I out, bool bias, bool current, double saved_split = 1.0) {
  Op op = linear(name, tokens, in, out, 2.0, bias, saved_split);
  const double T = static_cast<double>(tokens), In = static_cast<double>(in), Out = static_cast<double>(out);
  auto fp8_gemm = [](Kernel k) {
    const double M = static_cast<double>(k.m), N = static_cast<double>(k.n), K = static_cast<double>(k.k);
    k.bytes = static_cast<double>(k.batch) * (M * K + K * N + 2.0 * M * N);
    k.fp8 = true;
    return k;
  };
  for (auto* pass : {&op.forward, &op.backward})
    for (auto& k : *pass) k = fp8_gemm(k);
  // Casts are memory-bound (no matmul FLOPs: the op's FLOPs stay its GEMMs', as MFU counts them).
  const double cast = current ? 6.0 : 4.0;                // bytes moved per element
  const double history = current ? 8.0 : kAmaxHistoryBytes;  // per tensor: its scale, or its history
  op.forward.insert(op.forward.begin(), {memory(name + ".cast_fp8", T * In * cast, 0),
                                         memory(name + ".fp8_scales", 2.0 * history, 0)});
  op.backward.insert(op.backward.begin(), {memory(name + ".grad.cast_fp8", T * Out * cast, 0),
                                           memory(name + ".grad.fp8_scales", history, 0)});
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

void mark_scores(Op& op) {
  for (auto* pass : {&op.forward, &op.backward})
    for (auto& k : *pass) k.scores = true;
}

// Under sequence parallelism `tokens_h` is already this rank's share.
Op norm(const std::string& name, const TransformerSpec& s, double tokens_h, double e) {
  Op op = elementwise(name, tokens_h, e, 1.0, tokens_h * e, 8.0);
  op.params = (s.norm == Norm::LayerNorm ? 2.0 : 1.0) * static_cast<double>(s.hidden_size);
  return op;
}

// Dropout keeps a 1-byte mask per element for backward.
Op dropout_add(const std::string& name, double elems, double e, bool dropout) {
  return elementwise(name, elems, e, 2.0, dropout ? elems : 0.0, dropout ? 3.0 : 1.0);
}

Layer embedding_layer(const TransformerSpec& s, const BuildOptions& o, double e) {
  const I t = o.micro_batch * s.seq_len / o.context;  // this context rank's tokens
  const double th = static_cast<double>(t) * static_cast<double>(s.hidden_size);
  const double tp = static_cast<double>(o.tensor);
  // The table is split by vocabulary; each rank gathers its rows, the outputs are summed.
  const double table = static_cast<double>(s.vocab_size) * static_cast<double>(s.hidden_size) / tp;
  Layer l{"embedding", LayerKind::Embedding, {}, 0};
  Op emb;
  emb.name = "embedding";
  emb.forward = {memory("embedding.gather", 2.0 * th * e, 0)};
  // The dense gradient of the table is zeroed and scatter-added.
  emb.backward = {memory("embedding.scatter_add", 2.0 * th * e + table * e, th)};
  emb.params = table;
  if (s.position_embedding == PositionEmbedding::Learned)
    emb.params += static_cast<double>(s.seq_len) * static_cast<double>(s.hidden_size);
  l.ops.push_back(emb);
  const double local = o.sequence_parallel ? th / tp : th;
  if (s.dropout) l.ops.push_back(elementwise("embedding.dropout", local, e, 1.0, local, 2.0));
  l.output_bytes = th * e;
  l.tensor_split.bytes = th * e;
  l.tensor_split.forward_sums = 1;  // partial lookups of the vocabulary-split table are summed
  return l;
}

// ViT: the patch-embedding convolution (replicated on every tensor rank), the class token
// prepended, learned position embeddings added (Dosovitskiy et al. 2021, Eq. 1).
Layer patch_embedding_layer(const TransformerSpec& s, const BuildOptions& o, double e) {
  const I side = s.image_size / s.patch_size;
  const double th = static_cast<double>(o.micro_batch * s.seq_len) * static_cast<double>(s.hidden_size);
  Layer l{"patch_embedding", LayerKind::Embedding, {}, 0};
  const ConvShape c{o.micro_batch, s.channels, s.image_size, s.image_size, s.hidden_size, s.patch_size, s.patch_size,
                    s.patch_size, s.patch_size, 0, 0, 1};
  Op conv;
  conv.name = "patch_embedding";
  conv.forward = {conv_kernel("patch_embedding", c, ConvPass::Forward, e)};
  conv.backward = {conv_kernel("patch_embedding.wgrad", c, ConvPass::Wgrad, e)};  // no gradient for the image
  conv.params = static_cast<double>(s.hidden_size) * static_cast<double>(s.channels * s.patch_size * s.patch_size) +
                static_cast<double>(s.hidden_size);
  conv.saved_bytes = conv.saved_bytes_selective =
      static_cast<double>(o.micro_batch * s.channels * s.image_size * s.image_size) * e;
  conv.matmul = true;
  l.ops.push_back(conv);
  Op tokens = elementwise("class_token_and_positions", th, e, 2.0, 0.0, 1.0);
  tokens.params = static_cast<double>(s.hidden_size) * (1.0 + static_cast<double>(side * side + 1));
  l.ops.push_back(tokens);
  const double local = o.sequence_parallel ? th / static_cast<double>(o.tensor) : th;
  if (s.dropout) l.ops.push_back(elementwise("embedding.dropout", local, e, 1.0, local, 2.0));
  l.output_bytes = th * e;
  l.tensor_split.bytes = th * e;  // replicated: nothing to sum
  return l;
}

// Shapes of one tensor-parallel rank's slice of a block.
struct Slice {
  I b, q, h, d, heads, kv_heads, ffn, tokens;
  I q_local;  // query positions this context-parallel rank holds (q: all the keys it attends over)
  double t, th, th_local, e;  // th_local: tokens x hidden this rank keeps under sequence parallelism
  double gathered_split;      // how many ways a gathered GEMM input is saved split
  bool fp8;                   // the block's linear layers in FP8 (BuildOptions::fp8)
  bool fp8_current;           // ... scaled by each tensor's current amax
};

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
  x.fp8_current = o.fp8_current_scaling;
  return x;
}

// The linear layer of a block: FP8 under Transformer Engine, else in the activation precision.
Op block_linear(const std::string& name, I tokens, I in, I out, double e, bool bias, const Slice& x, double saved_split = 1.0) {
  return x.fp8 ? fp8_linear(name, tokens, in, out, bias, x.fp8_current, saved_split)
               : linear(name, tokens, in, out, e, bias, saved_split);
}

void attention_ops(Layer& l, const TransformerSpec& s, const BuildOptions& o, const Slice& x) {
  const double e = x.e;
  const double kv = static_cast<double>(x.tokens) * static_cast<double>(x.kv_heads * x.d) * e;  // K or V
  const double q_bytes = static_cast<double>(x.tokens) * static_cast<double>(x.heads * x.d) * e;
  l.ops.push_back(block_linear("qkv", x.tokens, x.h, (x.heads + 2 * x.kv_heads) * x.d, e, s.linear_bias, x, x.gathered_split));
  const I bh = x.b * x.heads;
  if (o.attention == Attention::Flash) {
    // One fused kernel; backward recomputes the scores, hence 2.5x the forward matmul work.
    Op fa;
    fa.name = "flash_attention";
    Kernel f = gemm("flash_attention", bh, x.q_local, x.q, x.d, e, KernelKind::Attention);
    f.flops *= 2.0;  // QK^T and PV
    // Q and O of this rank's tokens; K and V of every rank's (each chunk streams past, in turn).
    f.bytes = 2.0 * q_bytes + 2.0 * kv * static_cast<double>(o.context);
    Kernel bw = f;
    bw.name = "flash_attention.bwd";
    bw.flops = 2.5 * f.flops;
    bw.bytes = 2.0 * f.bytes;
    fa.forward = {f};
    fa.backward = {bw};
    fa.saved_bytes = fa.saved_bytes_selective =
        2.0 * q_bytes + 2.0 * kv + static_cast<double>(bh * x.q_local) * 4.0;  // Q, O, K, V, log-sum-exp
    fa.matmul = true;
    fa.context_attention = o.context > 1;
    l.ops.push_back(fa);
    l.context_kv_bytes = o.context > 1 ? 2.0 * kv : 0.0;
    if (o.context > 1 && !o.context_balanced) {
      // Contiguous chunks of a causal sequence: the last rank's queries see every key, the first
      // rank's only its own. The ring advances at the pace of the last, whose extra work is
      // (2c-1)/c - 1 of the average; it is waiting, not model FLOPs.
      const double c = static_cast<double>(o.context), extra = (2.0 * c - 1.0) / c - 1.0;
      Op lag;
      lag.name = "attention.causal_imbalance";
      Kernel lf = f, lb = bw;
      lf.name = "flash_attention.imbalance";
      lb.name = "flash_attention.bwd.imbalance";
      lf.flops *= extra;
      lb.flops *= extra;
      lf.bytes *= extra;
      lb.bytes *= extra;
      lag.forward = {lf};
      lag.backward = {lb};
      l.ops.push_back(lag);
    }
  } else {
    const double scores = static_cast<double>(bh) * static_cast<double>(x.q) * static_cast<double>(x.q);
    Op qk;
    qk.name = "attention.scores";
    qk.forward = {gemm("attention.qk", bh, x.q, x.q, x.d, e, KernelKind::Attention)};
    qk.backward = {gemm("attention.qk.dq", bh, x.q, x.d, x.q, e, KernelKind::Attention),
                   gemm("attention.qk.dk", bh, x.q, x.d, x.q, e, KernelKind::Attention)};
    qk.saved_bytes = qk.saved_bytes_selective = q_bytes + kv;  // Q and K
    mark_scores(qk);
    qk.selective = qk.matmul = true;
    l.ops.push_back(qk);
    Op sm = elementwise("attention.softmax", scores, e, 1.0, scores * e, 5.0);
    sm.saved_bytes_selective = 0;
    sm.selective = true;
    mark_scores(sm);
    l.ops.push_back(sm);
    if (s.dropout) {
      Op dr = elementwise("attention.dropout", scores, e, 1.0, scores * (1.0 + e), 2.0);
      dr.saved_bytes_selective = 0;
      dr.selective = true;
      mark_scores(dr);
      l.ops.push_back(dr);
    }
    Op pv;
    pv.name = "attention.context";
    pv.forward = {gemm("attention.pv", bh, x.q, x.d, x.q, e, KernelKind::Attention)};
    pv.backward = {gemm("attention.pv.dp", bh, x.q, x.q, x.d, e, KernelKind::Attention),
                   gemm("attention.pv.dv", bh, x.q, x.d, x.q, e, KernelKind::Attention)};
    pv.saved_bytes = pv.saved_bytes_selective = kv;  // V; the probabilities are counted above
    mark_scores(pv);
    pv.matmul = true;
    l.ops.push_back(pv);
  }
  Op out = block_linear("attention.out", x.tokens, x.heads * x.d, x.h, e, false, x);
  if (s.linear_bias) out.params += static_cast<double>(x.h) / x.t;  // the bias is added once, on one rank's share
  l.ops.push_back(out);
  l.ops.push_back(dropout_add("attention.residual", x.th_local, e, s.dropout));
}

void mlp_ops(Layer& l, const TransformerSpec& s, const Slice& x) {
  const double e = x.e;
  const double tf = static_cast<double>(x.tokens) * static_cast<double>(x.ffn);
  if (s.mlp == Mlp::SwiGlu) {
    l.ops.push_back(block_linear("mlp.gate_up", x.tokens, x.h, 2 * x.ffn, e, s.linear_bias, x, x.gathered_split));
    l.ops.push_back(elementwise("mlp.swiglu", tf, e, 2.0, 2.0 * tf * e, 6.0));
  } else {
    l.ops.push_back(block_linear("mlp.fc1", x.tokens, x.h, x.ffn, e, s.linear_bias, x, x.gathered_split));
    l.ops.push_back(elementwise("mlp.gelu", tf, e, 1.0, tf * e, 10.0));
  }
  Op fc2 = block_linear("mlp.fc2", x.tokens, x.ffn, x.h, e, false, x);
  if (s.linear_bias) fc2.params += static_cast<double>(x.h) / x.t;
  l.ops.push_back(fc2);
  l.ops.push_back(dropout_add("mlp.residual", x.th_local, e, s.dropout));
}

// Multi-head latent attention (DeepSeek-AI 2024, DeepSeek-V2 Sec. 2.1; V3 Sec. 2.1.1), approximated
// as its GEMMs at their true shapes: the down-projections of queries and keys/values (replicated on
// every tensor rank), their norms, the per-head up-projections (split by heads), attention with
// query/key heads of qk_nope + qk_rope and value heads of v_head_dim, and the output projection.
// The decoupled rotary key is part of the KV down-projection's output; the rotary embedding
// itself is not priced (an element-wise pass, as for every rotary model here).
void mla_ops(Layer& l, const TransformerSpec& s, const BuildOptions& o, const Slice& x) {
  const double e = x.e;
  const I dqk = s.qk_nope_head_dim + s.qk_rope_head_dim, dv = s.v_head_dim;
  if (s.q_lora_rank > 0) {
    Op qa = linear("mla.q_down", x.tokens, x.h, s.q_lora_rank, e, false, x.gathered_split);
    qa.params /= x.t;
    qa.useful = 1.0 / x.t;  // every tensor rank computes it: model FLOPs count it once
    l.ops.push_back(qa);
    Op qn = norm("mla.q_norm", s, static_cast<double>(x.tokens * s.q_lora_rank), e);
    qn.params = static_cast<double>(s.q_lora_rank) / x.t;
    l.ops.push_back(qn);
    l.ops.push_back(linear("mla.q_up", x.tokens, s.q_lora_rank, x.heads * dqk, e, false));
  } else {
    l.ops.push_back(linear("mla.q", x.tokens, x.h, x.heads * dqk, e, false, x.gathered_split));
  }
  Op kva = linear("mla.kv_down", x.tokens, x.h, s.kv_lora_rank + s.qk_rope_head_dim, e, false, x.gathered_split);
  kva.params /= x.t;
  kva.useful = 1.0 / x.t;
  l.ops.push_back(kva);
  Op kvn = norm("mla.kv_norm", s, static_cast<double>(x.tokens * s.kv_lora_rank), e);
  kvn.params = static_cast<double>(s.kv_lora_rank) / x.t;
  l.ops.push_back(kvn);
  l.ops.push_back(linear("mla.kv_up", x.tokens, s.kv_lora_rank, x.heads * (s.qk_nope_head_dim + dv), e, false));
  const I bh = x.b * x.heads;
  const double q_bytes = static_cast<double>(x.tokens * x.heads * dqk) * e;
  const double v_bytes = static_cast<double>(x.tokens * x.heads * dv) * e;
  if (o.attention == Attention::Flash) {
    Op fa;
    fa.name = "flash_attention";
    Kernel f = gemm("flash_attention", bh, x.q, x.q, dqk, e, KernelKind::Attention);
    f.flops = 2.0 * static_cast<double>(bh) * static_cast<double>(x.q) * static_cast<double>(x.q) * static_cast<double>(dqk + dv);
    f.bytes = 2.0 * q_bytes + 2.0 * v_bytes;
    Kernel bw = f;
    bw.name = "flash_attention.bwd";
    bw.flops = 2.5 * f.flops;
    bw.bytes = 2.0 * f.bytes;
    fa.forward = {f};
    fa.backward = {bw};
    fa.saved_bytes = fa.saved_bytes_selective = 2.0 * q_bytes + 2.0 * v_bytes + static_cast<double>(bh * x.q) * 4.0;
    fa.matmul = true;
    l.ops.push_back(fa);
  } else {
    const double scores = static_cast<double>(bh) * static_cast<double>(x.q) * static_cast<double>(x.q);
    Op qk;
    qk.name = "attention.scores";
    qk.forward = {gemm("attention.qk", bh, x.q, x.q, dqk, e, KernelKind::Attention)};
    qk.backward = {gemm("attention.qk.dq", bh, x.q, dqk, x.q, e, KernelKind::Attention),
                   gemm("attention.qk.dk", bh, x.q, dqk, x.q, e, KernelKind::Attention)};
    qk.saved_bytes = qk.saved_bytes_selective = 2.0 * q_bytes;
    mark_scores(qk);
    qk.selective = qk.matmul = true;
    l.ops.push_back(qk);
    Op sm = elementwise("attention.softmax", scores, e, 1.0, scores * e, 5.0);
    sm.saved_bytes_selective = 0;
    sm.selective = true;
    mark_scores(sm);
    l.ops.push_back(sm);
    Op pv;
    pv.name = "attention.context";
    pv.forward = {gemm("attention.pv", bh, x.q, dv, x.q, e, KernelKind::Attention)};
    pv.backward = {gemm("attention.pv.dp", bh, x.q, x.q, dv, e, KernelKind::Attention),
                   gemm("attention.pv.dv", bh, x.q, dv, x.q, e, KernelKind::Attention)};
    pv.saved_bytes = pv.saved_bytes_selective = v_bytes;
    mark_scores(pv);
    pv.matmul = true;
    l.ops.push_back(pv);
  }
  l.ops.push_back(linear("attention.out", x.tokens, x.heads * dv, x.h, e, false));
  l.ops.push_back(dropout_add("attention.residual", x.th_local, e, s.dropout));
}

// One GEMM per local expert, run as a grouped GEMM: `experts` x [tokens x in] . [in x out].
Op expert_linear(const std::string& name, I experts, I tokens, I in, I out, double e, bool bias) {
  Op op;
  op.name = name;
  op.forward = {gemm(name, experts, tokens, out, in, e)};
  op.backward = {gemm(name + ".dgrad", experts, tokens, in, out, e), gemm(name + ".wgrad", experts, in, out, tokens, e)};
  op.params = static_cast<double>(experts) * (static_cast<double>(in) * static_cast<double>(out) + (bias ? static_cast<double>(out) : 0.0));
  op.saved_bytes = op.saved_bytes_selective = static_cast<double>(experts * tokens) * static_cast<double>(in) * e;
  op.matmul = op.expert = true;
  return op;
}

// A mixture-of-experts MLP (see TransformerSpec): the router scores every token against every
// expert (replicated on tensor ranks), the tokens are permuted into expert order, each of this
// GPU's num_experts / expert experts runs its MLP on its tokens as a grouped GEMM (split by
// tensor parallelism like a dense MLP), the outputs are un-permuted and summed with their router
// weights, and the shared experts run as one dense MLP on every token. On average each expert gets
// tokens x experts_per_token / num_experts of every GPU's tokens, i.e. tokens x experts_per_token
// x expert / num_experts from the expert-parallel group; a capacity factor pads it to that many
// times as much.
void moe_ops(Layer& l, const TransformerSpec& s, const BuildOptions& o, const Slice& x) {
  const double e = x.e;
  const I k = s.experts_per_token, E = s.num_experts, local = E / o.expert;
  const double routed = static_cast<double>(x.tokens) * static_cast<double>(k) * static_cast<double>(o.expert) / static_cast<double>(E);
  const double padded = s.capacity_factor > 0 ? routed * s.capacity_factor : routed;
  const I per_expert = std::max<I>(1, static_cast<I>(std::ceil(padded)));
  const I f = s.expert_ffn_hidden_size / o.tensor;
  const double tkh = static_cast<double>(x.tokens) * static_cast<double>(k) * static_cast<double>(x.h);
  Op router = linear("moe.router", x.tokens, x.h, E, e, s.expert_bias, x.gathered_split);
  router.params /= x.t;
  router.useful = 1.0 / x.t;  // replicated on every tensor rank: model FLOPs count it once
  l.ops.push_back(router);
  l.ops.push_back(elementwise("moe.topk", static_cast<double>(x.tokens * E), e, 1.0, static_cast<double>(x.tokens * k) * 4.0, 4.0));
  l.ops.push_back(elementwise("moe.permute", tkh, e, 1.0, 0.0, 0.0));
  ExpertSplit split;
  split.first = l.ops.size();
  const double useful = routed / static_cast<double>(per_expert);
  Op up = expert_linear("moe.experts.gate_up", local, per_expert, x.h, (s.mlp == Mlp::SwiGlu ? 2 : 1) * f, e, s.expert_bias);
  up.useful = useful;
  l.ops.push_back(up);
  const double act = static_cast<double>(local * per_expert) * static_cast<double>(f);
  if (s.mlp == Mlp::SwiGlu) l.ops.push_back(elementwise("moe.experts.swiglu", act, e, 2.0, 2.0 * act * e, 6.0));
  else l.ops.push_back(elementwise("moe.experts.gelu", act, e, 1.0, act * e, 10.0));
  Op down = expert_linear("moe.experts.down", local, per_expert, f, x.h, e, false);
  if (s.expert_bias) down.params += static_cast<double>(local * x.h) / x.t;  // added once, on one rank's share
  down.useful = useful;
  l.ops.push_back(down);
  split.last = l.ops.size();
  split.dispatch_bytes = tkh * e / x.t;  // each tensor rank dispatches its share of the tokens
  split.local_experts = local;
  split.active_share = static_cast<double>(k) / static_cast<double>(E);
  split.capacity = s.capacity_factor;
  l.experts = split;
  l.ops.push_back(elementwise("moe.unpermute", tkh, e, 2.0, 0.0, 2.0));
  if (s.shared_experts > 0) {
    const I sf = s.shared_experts * f;
    const double tf = static_cast<double>(x.tokens) * static_cast<double>(sf);
    if (s.mlp == Mlp::SwiGlu) {
      l.ops.push_back(linear("moe.shared.gate_up", x.tokens, x.h, 2 * sf, e, false, x.gathered_split));
      l.ops.push_back(elementwise("moe.shared.swiglu", tf, e, 2.0, 2.0 * tf * e, 6.0));
    } else {
      l.ops.push_back(linear("moe.shared.fc1", x.tokens, x.h, sf, e, false, x.gathered_split));
      l.ops.push_back(elementwise("moe.shared.gelu", tf, e, 1.0, tf * e, 10.0));
    }
    l.ops.push_back(linear("moe.shared.down", x.tokens, sf, x.h, e, false));
  }
  l.ops.push_back(dropout_add("mlp.residual", x.th_local, e, s.dropout));
}

Layer block_layer(const TransformerSpec& s, const BuildOptions& o, double e, I index) {
  const Slice x = slice(s, o, e);
  Layer l{"block." + std::to_string(index), LayerKind::Block, {}, x.th_local * e};
  Op n1 = norm("norm1", s, x.th_local, e);
  n1.params /= x.t;  // replicated on every rank; counted once across the group
  l.ops.push_back(n1);
  if (s.mla()) mla_ops(l, s, o, x);
  else attention_ops(l, s, o, x);
  Op n2 = norm("norm2", s, x.th_local, e);
  n2.params /= x.t;
  l.ops.push_back(n2);
  if (s.moe_block(index)) moe_ops(l, s, o, x);
  else mlp_ops(l, s, x);
  l.output_bytes = x.th * e;
  // Attention and MLP each end in a row-parallel GEMM whose partial outputs are summed, forward
  // and (for the input gradients of the column-parallel GEMMs) backward; with sequence
  // parallelism each pass also gathers the sharded inputs of QKV and fc1, and backward gathers
  // them once more for the weight gradients (Korthikanti et al. 2022, Sec. 4.2.2).
  l.tensor_split = {true, x.th * e, 2, 2, 2, 4};
  return l;
}

Layer head_layer(const TransformerSpec& s, const BuildOptions& o, double e) {
  const Slice x = slice(s, o, e);
  const I vocab = (s.vocab_size + o.tensor - 1) / o.tensor;  // vocabulary-parallel output layer
  const double tv = static_cast<double>(x.tokens) * static_cast<double>(vocab);
  Layer l{"head", LayerKind::Head, {}, x.th_local * e};
  Op fn = norm("final_norm", s, x.th_local, e);
  fn.params /= x.t;
  l.ops.push_back(fn);
  Op logits = linear("lm_head", x.tokens, s.hidden_size, vocab, e, false, x.gathered_split);
  if (s.tied_embeddings) logits.params = 0;  // shares the embedding table
  l.ops.push_back(logits);
  // Cross-entropy in fp32: the softmax of the logits is kept for backward (Korthikanti's 4sbv).
  Op loss;
  loss.name = "cross_entropy";
  loss.forward = {memory("cross_entropy", tv * (e + 4.0), 5.0 * tv)};
  loss.backward = {memory("cross_entropy.bwd", tv * (4.0 + e), 2.0 * tv)};
  loss.saved_bytes = loss.saved_bytes_selective = 4.0 * tv;
  l.ops.push_back(loss);
  // The input gradient of the vocabulary-split head is summed; under sequence parallelism its
  // sharded input is gathered first.
  l.tensor_split.bytes = x.th * e;
  l.tensor_split.backward_sums = 1;
  l.tensor_split.forward_gathers = 1;
  return l;
}

// ViT: the final norm, then a classifier on the class token alone (replicated on every tensor
// rank) and the loss over the classes.
Layer classifier_layer(const TransformerSpec& s, const BuildOptions& o, double e) {
  const Slice x = slice(s, o, e);
  Layer l{"head", LayerKind::Head, {}, x.th_local * e};
  Op fn = norm("final_norm", s, x.th_local, e);
  fn.params /= x.t;
  l.ops.push_back(fn);
  l.ops.push_back(linear("classifier", o.micro_batch, s.hidden_size, s.classes, e, true));
  const double logits = static_cast<double>(o.micro_batch * s.classes);
  Op loss;
  loss.name = "cross_entropy";
  loss.forward = {memory("cross_entropy", logits * (e + 4.0), 5.0 * logits)};
  loss.backward = {memory("cross_entropy.bwd", logits * (4.0 + e), 2.0 * logits)};
  loss.saved_bytes = loss.saved_bytes_selective = 4.0 * logits;
  l.ops.push_back(loss);
  l.tensor_split.bytes = x.th * e;
  l.tensor_split.forward_gathers = 1;  // the sequence-sharded tokens, under sequence parallelism
  return l;
}

}  // namespace

ModelGraph build_transformer(const TransformerSpec& spec, const BuildOptions& options) {
  ModelGraph g{spec.name, options, {}, 0};
  const double e = options.activation_bytes;
  g.layers.reserve(static_cast<std::size_t>(spec.num_layers) + 2);
  g.layers.push_back(spec.vision() ? patch_embedding_layer(spec, options, e) : embedding_layer(spec, options, e));
  for (I i = 0; i < spec.num_layers; ++i) g.layers.push_back(block_layer(spec, options, e, i));
  g.layers.push_back(spec.vision() ? classifier_layer(spec, options, e) : head_layer(spec, options, e));
  if (spec.tied_embeddings && !spec.vision()) g.tied_params = g.layers.front().ops.front().params;
  return g;
}

}  // namespace dtsim::models
