#include "models/transformer_ops.hpp"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <vector>

namespace dtsim::models::detail {

namespace {

// One GEMM per local expert, run as a grouped GEMM: `experts` x [tokens x in] . [in x out].
Op expert_linear(const std::string& name, I experts, I tokens, I in, I out, double e, bool bias) {
  Op op;
  op.name = name;
  op.forward = {gemm(name, experts, tokens, out, in, e)};
  op.backward = {gemm(name + ".dgrad", experts, tokens, in, out, e), gemm(name + ".wgrad", experts, in, out, tokens, e)};
  op.backward.back().role = KernelRole::WeightGrad;
  op.params = static_cast<double>(experts) * (static_cast<double>(in) * static_cast<double>(out) + (bias ? static_cast<double>(out) : 0.0));
  op.saved_bytes = op.saved_bytes_selective = static_cast<double>(experts * tokens) * static_cast<double>(in) * e;
  op.matmul = op.expert = true;
  return op;
}

// Under FP8 the experts' grouped GEMMs run in FP8 too (Transformer Engine's GroupedLinear under
// fp8_autocast, as Megatron-Core's TEGroupedMLP runs them: one set of scales per expert's GEMM;
// DeepSeek-V3 report, arXiv:2412.19437, Sec. 3.3: FP8 Fprop, Dgrad and Wgrad in the MoE experts),
// keeping their permuted input in FP8 for backward.
void fp8_experts(Op& op, const Slice& x, I experts, I tokens, I in, I out) {
  if (!x.fp8) return;
  const double rows = static_cast<double>(experts) * static_cast<double>(tokens);
  to_fp8(op, rows * static_cast<double>(in), rows * static_cast<double>(out), static_cast<double>(experts), x.fp8_scaling);
  op.saved_bytes = op.saved_bytes_selective = rows * static_cast<double>(in);
}

// Megatron-Core's mla_up_proj module (multi_latent_attention.py, qkv_up_proj_and_rope_apply under
// CheckpointWithoutOutput): the query and key/value up-projections (and RoPE, not priced) run
// again before backward, and the Q, K and V they made, which attention keeps for its backward,
// are freed once attention has run. Of attention's ops [first, end) a fused call keeps Q, K and V
// (qk + v bytes) among what it saves; unfused, the scores' matmul keeps Q and K and the
// probabilities' matmul V.
void up_projection_recompute(Layer& l, std::initializer_list<std::size_t> up, std::size_t first, double qk, double v) {
  for (std::size_t i : up) l.ops[i].selective = true;
  auto drop = [](Op& op, double bytes) { op.saved_bytes_selective = std::max(0.0, op.saved_bytes_selective - bytes); };
  std::vector<Op*> matmuls;
  for (std::size_t i = first; i < l.ops.size(); ++i)
    if (l.ops[i].matmul) matmuls.push_back(&l.ops[i]);
  if (matmuls.size() == 1) return drop(*matmuls.front(), qk + v);
  drop(*matmuls.front(), qk);
  drop(*matmuls.back(), v);
}

}  // namespace

// Multi-head latent attention (DeepSeek-AI 2024, DeepSeek-V2 Sec. 2.1; V3 Sec. 2.1.1), approximated
// as its GEMMs at their true shapes: the down-projections of queries and keys/values (replicated on
// every tensor rank), their norms, the per-head up-projections (split by heads), attention with
// query/key heads of qk_nope + qk_rope and value heads of v_head_dim, and the output projection.
// The decoupled rotary key is part of the KV down-projection's output; the rotary embedding
// itself is not priced (an element-wise pass, as for every rotary model here). Under FP8 its
// projections run in FP8 as every block linear does (DeepSeek-V3 report Sec. 3.3: only the
// embedding, the head, the gating, norms and attention itself stay in higher precision).
void mla_ops(Layer& l, const TransformerSpec& s, const BuildOptions& o, const Slice& x) {
  const double e = x.e;
  const I dqk = s.qk_nope_head_dim + s.qk_rope_head_dim, dv = s.v_head_dim;
  if (s.q_lora_rank > 0) {
    Op qa = block_linear("mla.q_down", x.tokens, x.h, s.q_lora_rank, e, false, x, x.gathered_split);
    qa.reads_norm = true;
    qa.params /= x.t;
    qa.useful = 1.0 / x.t;  // every tensor rank computes it: model FLOPs count it once
    l.ops.push_back(qa);
    Op qn = norm("mla.q_norm", s, o, static_cast<double>(x.tokens * s.q_lora_rank), e);
    qn.params = static_cast<double>(s.q_lora_rank) / x.t;
    l.ops.push_back(qn);
  }
  const std::size_t q_up = l.ops.size();
  if (s.q_lora_rank > 0) {
    l.ops.push_back(block_linear("mla.q_up", x.tokens, s.q_lora_rank, x.heads * dqk, e, false, x));
  } else {
    l.ops.push_back(block_linear("mla.q", x.tokens, x.h, x.heads * dqk, e, false, x, x.gathered_split));
    l.ops.back().reads_norm = true;
  }
  Op kva = block_linear("mla.kv_down", x.tokens, x.h, s.kv_lora_rank + s.qk_rope_head_dim, e, false, x, x.gathered_split);
  kva.reads_norm = true;
  kva.params /= x.t;
  kva.useful = 1.0 / x.t;
  l.ops.push_back(kva);
  Op kvn = norm("mla.kv_norm", s, o, static_cast<double>(x.tokens * s.kv_lora_rank), e);
  kvn.params = static_cast<double>(s.kv_lora_rank) / x.t;
  l.ops.push_back(kvn);
  const std::size_t kv_up = l.ops.size();
  l.ops.push_back(block_linear("mla.kv_up", x.tokens, s.kv_lora_rank, x.heads * (s.qk_nope_head_dim + dv), e, false, x));
  const I bh = x.b * x.heads;
  const double q_bytes = static_cast<double>(x.tokens * x.heads * dqk) * e;
  const double v_bytes = static_cast<double>(x.tokens * x.heads * dv) * e;
  const std::size_t first = l.ops.size();
  if (o.attention == Attention::Flash) {
    // Under context parallelism this rank's queries attend over every rank's keys and values,
    // which pass around the ring (per head: K as wide as Q, and V).
    Kernel f = gemm("flash_attention", bh, x.q_local, x.q, dqk, e, KernelKind::Attention);
    f.causal = true;  // latent attention is a language model's: causal
    f.flops = 2.0 * static_cast<double>(bh) * static_cast<double>(x.q_local) * static_cast<double>(x.q) * static_cast<double>(dqk + dv);
    f.bytes = q_bytes + v_bytes + (q_bytes + v_bytes) * static_cast<double>(o.context);
    const double lse = static_cast<double>(bh * x.q_local) * 4.0;
    Op fa = flash_attention(f, 2.0 * q_bytes + 2.0 * v_bytes + lse, v_bytes + lse);
    fa.context_attention = o.context > 1;
    l.ops.push_back(fa);
    l.context_kv_bytes = o.context > 1 ? q_bytes + v_bytes : 0.0;
  } else {
    standard_attention(l, bh, x.q, dqk, dv, e, 2.0 * q_bytes, v_bytes, false);
  }
  core_attention_recompute(l, first, o, 2.0 * q_bytes + v_bytes);  // Q, K (as wide as Q) and V
  if (o.recompute_modules & recompute_module::kMlaUpProj) up_projection_recompute(l, {q_up, kv_up}, first, 2.0 * q_bytes, v_bytes);
  l.ops.push_back(block_linear("attention.out", x.tokens, x.heads * dv, x.h, e, false, x));
  l.ops.push_back(dropout_add("attention.residual", x.th_local, e, s.dropout));
}

// A mixture-of-experts MLP (see TransformerSpec): the router scores every token against every
// expert (replicated on tensor ranks), the tokens are permuted into expert order, each of this
// GPU's num_experts / expert experts runs its MLP on its tokens as a grouped GEMM (split by
// tensor parallelism like a dense MLP), the outputs are un-permuted and summed with their router
// weights, and the shared experts run as one dense MLP on every token. On average each expert gets
// tokens x experts_per_token / num_experts of every GPU's tokens, i.e. tokens x experts_per_token
// x expert / num_experts from the expert-parallel group; a capacity factor pads it to that many
// times as much. Folded (expert tensor parallelism `expert_tensor` other than `tensor`), each expert
// splits over expert_tensor ranks and gets the tokens of expert x expert_tensor / tensor GPUs'
// worth of micro-batches: every GPU still computes tokens x experts_per_token / tensor tokens'
// expert work, at an expert_tensor-th of the width.
void moe_ops(Layer& l, const TransformerSpec& s, const BuildOptions& o, const Slice& x) {
  const double e = x.e;
  const I k = s.experts_per_token, E = s.num_experts, local = E / o.expert;
  const I etp = o.expert_tensor > 0 ? o.expert_tensor : o.tensor;
  const double folded = static_cast<double>(etp) / static_cast<double>(o.tensor);  // 1 unless folded
  const double routed =
      static_cast<double>(x.tokens) * static_cast<double>(k) * static_cast<double>(o.expert) * folded / static_cast<double>(E);
  const double padded = s.capacity_factor > 0 ? routed * s.capacity_factor : routed;
  const I per_expert = std::max<I>(1, static_cast<I>(std::ceil(padded)));
  const I f = s.expert_ffn_hidden_size / etp;
  const double tkh = static_cast<double>(x.tokens) * static_cast<double>(k) * static_cast<double>(x.h);
  const std::size_t module = l.ops.size();
  Op router = linear("moe.router", x.tokens, x.h, E, e, s.expert_bias, x.gathered_split);
  router.reads_norm = true;
  router.params /= x.t;
  router.useful = 1.0 / x.t;  // replicated on every tensor rank: model FLOPs count it once
  l.ops.push_back(router);
  l.ops.push_back(elementwise("moe.topk", static_cast<double>(x.tokens * E), e, 1.0, static_cast<double>(x.tokens * k) * 4.0, 4.0));
  l.ops.push_back(elementwise("moe.permute", tkh, e, 1.0, 0.0, 0.0));
  ExpertSplit split;
  split.first = l.ops.size();
  const double useful = routed / static_cast<double>(per_expert);
  const I up_width = (s.mlp == Mlp::SwiGlu ? 2 : 1) * f;
  Op up = expert_linear("moe.experts.gate_up", local, per_expert, x.h, up_width, e, s.expert_bias);
  fp8_experts(up, x, local, per_expert, x.h, up_width);
  up.useful = useful;
  l.ops.push_back(up);
  const double act = static_cast<double>(local * per_expert) * static_cast<double>(f);
  if (s.mlp == Mlp::SwiGlu) l.ops.push_back(elementwise("moe.experts.swiglu", act, e, 2.0, 2.0 * act * e, 6.0));
  else if (s.mlp == Mlp::SquaredRelu) l.ops.push_back(squared_relu("moe.experts.squared_relu", act, e));
  else l.ops.push_back(elementwise("moe.experts.gelu", act, e, 1.0, act * e, 10.0));
  Op down = expert_linear("moe.experts.down", local, per_expert, f, x.h, e, false);
  fp8_experts(down, x, local, per_expert, f, x.h);
  // Megatron-Core's moe_act module: the activation runs again before backward and its output,
  // the down projection's input, is not kept.
  if (o.recompute_modules & recompute_module::kMoeAct) {
    l.ops.back().selective = true;
    down.saved_bytes_selective = 0;
  }
  if (s.expert_bias) down.params += static_cast<double>(local * x.h) / static_cast<double>(etp);  // added once, on one rank's share
  down.useful = useful;
  l.ops.push_back(down);
  split.last = l.ops.size();
  split.dispatch_bytes = tkh * e / x.t;  // each tensor rank dispatches its share of the tokens
  split.local_experts = local;
  split.active_share = static_cast<double>(k) / static_cast<double>(E);
  split.capacity = s.capacity_factor;
  split.module = module;
  l.experts = split;
  l.ops.push_back(elementwise("moe.unpermute", tkh, e, 2.0, 0.0, 2.0));
  if (s.shared_experts > 0) {
    l.experts.shared_first = l.ops.size();
    const I sf = s.shared_experts * f;
    const double tf = static_cast<double>(x.tokens) * static_cast<double>(sf);
    if (s.mlp == Mlp::SwiGlu) {
      l.ops.push_back(block_linear("moe.shared.gate_up", x.tokens, x.h, 2 * sf, e, false, x, x.gathered_split));
      l.ops.back().reads_norm = true;
      l.ops.push_back(elementwise("moe.shared.swiglu", tf, e, 2.0, 2.0 * tf * e, 6.0));
    } else {
      l.ops.push_back(block_linear("moe.shared.fc1", x.tokens, x.h, sf, e, false, x, x.gathered_split));
      l.ops.back().reads_norm = true;
      l.ops.push_back(s.mlp == Mlp::SquaredRelu ? squared_relu("moe.shared.squared_relu", tf, e)
                                                : elementwise("moe.shared.gelu", tf, e, 1.0, tf * e, 10.0));
    }
    l.experts.shared_fc2 = l.ops.size();
    l.ops.push_back(block_linear("moe.shared.down", x.tokens, sf, x.h, e, false, x));
    l.experts.shared_last = l.ops.size();
  }
  l.ops.push_back(dropout_add("mlp.residual", x.th_local, e, s.dropout));
}

}  // namespace dtsim::models::detail
