#include "models/model_graph.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "models/transformer_ops.hpp"

namespace dtsim::models {

namespace {

using namespace detail;


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
  emb.tensors = {table};
  if (s.position_embedding == PositionEmbedding::Learned) {
    emb.params += static_cast<double>(s.seq_len) * static_cast<double>(s.hidden_size);
    emb.tensors.push_back(static_cast<double>(s.seq_len) * static_cast<double>(s.hidden_size));
  }
  l.ops.push_back(emb);
  const double local = o.sequence_parallel ? th / tp : th;
  if (s.embedding_norm) {
    Op n = norm("embedding.norm", s, o, local, e);
    n.params /= tp;  // replicated on every rank; counted once across the group
    l.ops.push_back(n);
  }
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

// The attention between its projections: one fused kernel (flash) or the standard passes.
void attention_core(Layer& l, const TransformerSpec& s, const BuildOptions& o, const Slice& x) {
  const double e = x.e;
  const double kv = static_cast<double>(x.tokens) * static_cast<double>(x.kv_heads * x.d) * e;  // K or V
  const double q_bytes = static_cast<double>(x.tokens) * static_cast<double>(x.heads * x.d) * e;
  const I bh = x.b * x.heads;
  const std::size_t first = l.ops.size();
  if (o.attention == Attention::Flash) {
    // One fused kernel (flash_attention in transformer_ops.hpp).
    Kernel f = gemm("flash_attention", bh, x.q_local, x.q, x.d, e, KernelKind::Attention);
    f.flops *= 2.0;  // QK^T and PV
    f.causal = !s.vision();  // language models mask the future; a ViT attends over all patches
    f.dropout = s.dropout;   // GPT-2's attention dropout, inside the fused kernel
    // Q and O of this rank's tokens; K and V of every rank's (each chunk streams past, in turn).
    f.bytes = 2.0 * q_bytes + 2.0 * kv * static_cast<double>(o.context);
    // For a stack's copies around the call: Q and K of this rank's tokens, and RoPE's table of
    // tokens x d/2 complex64 entries (torchtitan's freqs_cis, 8 bytes each).
    const double td = static_cast<double>(x.tokens) * static_cast<double>(x.d);
    f.elem_bytes = e;
    f.io = {td * static_cast<double>(x.heads), td * static_cast<double>(x.kv_heads),
            s.position_embedding == PositionEmbedding::Rotary ? 4.0 * td : 0.0};
    const double lse = static_cast<double>(bh * x.q_local) * 4.0;
    Op fa = flash_attention(f, 2.0 * q_bytes + 2.0 * kv + lse, q_bytes + lse);  // keeps Q, O, K, V, log-sum-exp; returns O, lse
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
      Kernel lf = f, lb = fa.backward.front();
      lf.name = "flash_attention.imbalance";
      lb.name = "flash_attention.bwd.imbalance";
      lf.flops *= extra;
      lb.flops *= extra;
      lf.bytes *= extra;
      lb.bytes *= extra;
      lf.io = lb.io = {};  // waiting, not tensors: the copies ran with the call itself
      lag.forward = {lf};
      lag.backward = {lb};
      l.ops.push_back(lag);
    }
  } else {
    standard_attention(l, bh, x.q, x.d, x.d, e, q_bytes + kv, kv, s.dropout);  // saves Q and K, then V
  }
  core_attention_recompute(l, first, o, q_bytes + 2.0 * kv);
}

// The column-parallel projection into a block's attention or MLP (or both, fused): the matmuls
// `calls` as one GEMM of their summed outputs.
Op in_projection(const std::string& name, const TransformerSpec& s, const Slice& x, const std::vector<I>& calls) {
  const I out = std::accumulate(calls.begin(), calls.end(), I{0});
  Op in = block_linear(name, x.tokens, x.h, out, x.e, s.linear_bias, x, x.gathered_split);
  in.tp_linear = TpLinear::Column;
  in.reads_norm = true;
  if (calls.size() > 1) split_calls(in, calls, x.e);
  return in;
}

// The row-parallel projection back to the hidden width; its bias is added once, on one rank's share.
Op out_projection(const std::string& name, const TransformerSpec& s, const Slice& x, I in) {
  Op out = block_linear(name, x.tokens, in, x.h, x.e, false, x);
  out.tp_linear = TpLinear::Row;
  if (s.linear_bias) {
    out.params += static_cast<double>(x.h) / x.t;
    out.tensors.push_back(static_cast<double>(x.h) / x.t);
    mark_bias_grad(out, x.tokens, x.h, x.e);
  }
  return out;
}

std::vector<I> qkv_calls(const Slice& x) { return {x.heads * x.d, x.kv_heads * x.d, x.kv_heads * x.d}; }  // wq, wk, wv
// The MLP's input columns as separate matmuls: w1 (gate) and w3 (up) of a SwiGLU, else fc1.
std::vector<I> mlp_in_calls(const TransformerSpec& s, const Slice& x) {
  return s.mlp == Mlp::SwiGlu ? std::vector<I>{x.ffn, x.ffn} : std::vector<I>{x.ffn};
}

// QK-norm: the model's norm over rows of one head's width, for this rank's query and key heads
// (Qwen3's q_norm and k_norm, RMSNorm of head_dim; transformers/models/qwen3/modeling_qwen3.py).
Op qk_norm(const TransformerSpec& s, const BuildOptions& o, const Slice& x) {
  Op n = norm("qk_norm", s, o, static_cast<double>(x.tokens) * static_cast<double>((x.heads + x.kv_heads) * x.d), x.e);
  for (auto* pass : {&n.forward, &n.backward})
    for (auto& k : *pass) k.n = x.d;  // rows of one head, for a stack that prices norms by row
  const double weights = s.norm == Norm::LayerNorm ? 2.0 : 1.0;  // weight (and bias) of each
  n.params = 2.0 * weights * static_cast<double>(x.d) / x.t;     // q's and k's, replicated on every tensor rank
  n.tensors.assign(2 * static_cast<std::size_t>(weights), static_cast<double>(x.d));
  return n;
}

void attention_ops(Layer& l, const TransformerSpec& s, const BuildOptions& o, const Slice& x) {
  l.ops.push_back(in_projection("qkv", s, x, qkv_calls(x)));
  if (s.qk_norm) l.ops.push_back(qk_norm(s, o, x));
  attention_core(l, s, o, x);
  l.ops.push_back(out_projection("attention.out", s, x, x.heads * x.d));
  l.ops.push_back(dropout_add("attention.residual", x.th_local, x.e, s.dropout));
}

// The MLP's element-wise activation between its two projections.
void mlp_activation(Layer& l, const TransformerSpec& s, const Slice& x) {
  const double e = x.e;
  const double tf = static_cast<double>(x.tokens) * static_cast<double>(x.ffn);
  if (s.mlp == Mlp::SquaredRelu) {
    l.ops.push_back(squared_relu("mlp.squared_relu", tf, e));
    return;
  }
  const bool glu = s.mlp == Mlp::SwiGlu;
  Op act = glu ? elementwise("mlp.swiglu", tf, e, 2.0, 2.0 * tf * e, 6.0) : elementwise("mlp.gelu", tf, e, 1.0, tf * e, 10.0);
  mark_role(act, glu ? KernelRole::SwiGluForward : KernelRole::GeluForward, glu ? KernelRole::SwiGluBackward : KernelRole::GeluBackward,
            tf, e, false);
  l.ops.push_back(act);
}

void mlp_ops(Layer& l, const TransformerSpec& s, const Slice& x) {
  l.ops.push_back(in_projection(s.mlp == Mlp::SwiGlu ? "mlp.gate_up" : "mlp.fc1", s, x, mlp_in_calls(s, x)));
  mlp_activation(l, s, x);
  l.ops.push_back(out_projection("mlp.fc2", s, x, x.ffn));
  l.ops.push_back(dropout_add("mlp.residual", x.th_local, x.e, s.dropout));
}

// Parallel layers: attention and MLP read the same normed input, so their input projections run
// as one GEMM, and their outputs sum into one residual, so their output projections run as one
// GEMM over the concatenated attention context and MLP activation (flaxformer's
// ParallelFusedDecoderLayer, PaLM's implementation: q_wi_fused and o_wo_fused). Under tensor
// parallelism one partial result is summed each way where the sequential block sums two.
void parallel_ops(Layer& l, const TransformerSpec& s, const BuildOptions& o, const Slice& x) {
  std::vector<I> calls = qkv_calls(x);
  for (I c : mlp_in_calls(s, x)) calls.push_back(c);
  l.ops.push_back(in_projection("attention_mlp.in", s, x, calls));
  attention_core(l, s, o, x);
  mlp_activation(l, s, x);
  l.ops.push_back(out_projection("attention_mlp.out", s, x, x.heads * x.d + x.ffn));
  l.ops.push_back(dropout_add("residual", x.th_local, x.e, s.dropout));
}

// Megatron-Core's layernorm module (BuildOptions::recompute_modules): the block's norms run again
// before backward, and the projections that saved their output as input keep nothing of it (the
// output's storage is freed once used and refilled by the re-run).
void layernorm_recompute(Layer& l, const BuildOptions& o, const std::vector<std::size_t>& norms) {
  if (!(o.recompute_modules & recompute_module::kLayernorm)) return;
  for (std::size_t i : norms) l.ops[i].selective = true;
  for (auto& op : l.ops)
    if (op.reads_norm) op.saved_bytes_selective = 0;
}

// A module checkpointed whole (Megatron-Core's tensor_parallel.checkpoint): ops [first, end)
// run again before backward and keep only the module's input, `input` bytes; `pairs` of the
// tensor-parallel collectives they run are run again with them.
void checkpoint_module(Layer& l, std::size_t first, std::size_t end, double input, double pairs) {
  for (std::size_t i = first; i < end; ++i) {
    l.ops[i].selective = true;
    l.ops[i].saved_bytes_selective = i == first ? input : 0.0;
  }
  l.rerun_tp_pairs += pairs;
}

// Megatron-Core's mlp, moe and shared_experts modules over the MLP half from `first` (its last op
// the residual add, outside the module): a dense MLP, an MoE layer (its router on, shared experts
// and all-to-alls included) or its shared experts alone, each from `input`, the normed hidden
// state this rank holds. The MLP half's tensor-parallel pair is the layer's sums less attention's.
void mlp_recompute(Layer& l, const BuildOptions& o, std::size_t first, double input) {
  using namespace recompute_module;
  const bool moe = l.experts.moe();
  const double pairs = l.tensor_split.forward_sums - 1;
  if (moe ? (o.recompute_modules & kMoe) : (o.recompute_modules & kMlp)) {
    checkpoint_module(l, first, moe ? l.experts.module_end() : l.ops.size() - 1, input, pairs);
    return;
  }
  if (moe && l.experts.has_shared() && (o.recompute_modules & kSharedExperts))
    checkpoint_module(l, l.experts.shared_first, l.experts.shared_last, input, 1);  // their own column and row linears
}

Layer block_layer(const TransformerSpec& s, const BuildOptions& o, double e, I index) {
  const Slice x = slice(s, o, e);
  Layer l{"block." + std::to_string(index), LayerKind::Block, {}, x.th_local * e};
  Op n1 = norm("norm1", s, o, x.th_local, e);
  n1.params /= x.t;  // replicated on every rank; counted once across the group
  l.ops.push_back(n1);
  l.output_bytes = x.th * e;
  if (s.parallel_layers) {
    parallel_ops(l, s, o, x);
    // One gather of the normed input and one sum of the fused output forward; backward one
    // gather of dY (both branches' output gradient), one of the input again for the weight
    // gradient, and one sum of the input gradient.
    l.tensor_split = {true, x.th * e, 1, 1, 1, 2, {}, {}};
    layernorm_recompute(l, o, {0});
    return l;
  }
  if (s.mla()) mla_ops(l, s, o, x);
  else attention_ops(l, s, o, x);
  Op n2 = norm("norm2", s, o, x.th_local, e);
  n2.params /= x.t;
  const std::size_t second = l.ops.size();
  l.ops.push_back(n2);
  const std::size_t mlp_first = l.ops.size();
  if (s.moe_block(index)) moe_ops(l, s, o, x);
  else mlp_ops(l, s, x);
  // Attention and MLP each end in a row-parallel GEMM whose partial outputs are summed, forward
  // and (for the input gradients of the column-parallel GEMMs) backward; with sequence
  // parallelism each pass also gathers the sharded inputs of QKV and fc1, and backward gathers
  // them once more for the weight gradients (Korthikanti et al. 2022, Sec. 4.2.2).
  l.tensor_split = {true, x.th * e, 2, 2, 2, 4, {}, {}};
  // Folded experts (expert tensor parallelism other than tensor) take the sequence-parallel shard
  // each rank holds straight to the all-to-all and back (Megatron-Core's alltoall dispatcher with
  // expert TP 1): only attention's pair remains, unless shared experts run tensor-parallel.
  const bool folded = o.expert_tensor > 0 && o.expert_tensor != o.tensor;
  if (s.moe_block(index) && folded && s.shared_experts == 0) l.tensor_split = {true, x.th * e, 1, 1, 1, 2, {}, {}};
  mlp_recompute(l, o, s.moe_block(index) ? l.experts.module : mlp_first, x.th_local * e);
  layernorm_recompute(l, o, {0, second});
  return l;
}

// The final norm, the vocabulary-parallel output layer and the loss, named from `prefix`: the
// model's head, or a multi-token prediction module's, whose output layer is the model's own
// (`shared`: no parameters of its own).
void head_ops(Layer& l, const TransformerSpec& s, const BuildOptions& o, const Slice& x, const std::string& prefix, bool shared) {
  const double e = x.e;
  const I vocab = (s.vocab_size + o.tensor - 1) / o.tensor;  // vocabulary-parallel output layer
  const double tv = static_cast<double>(x.tokens) * static_cast<double>(vocab);
  Op fn = norm(prefix + "final_norm", s, o, x.th_local, e);
  fn.params /= x.t;
  l.ops.push_back(fn);
  Op logits = linear(prefix + "lm_head", x.tokens, s.hidden_size, vocab, e, false, x.gathered_split);
  if (s.tied_embeddings || shared) logits.params = 0;  // shares the embedding table, or the model's head
  l.ops.push_back(logits);
  // Cross-entropy in fp32: the softmax of the logits is kept for backward (Korthikanti's 4sbv).
  Op loss;
  loss.name = prefix + "cross_entropy";
  loss.forward = {memory("cross_entropy", tv * (e + 4.0), 5.0 * tv)};
  loss.backward = {memory("cross_entropy.bwd", tv * (4.0 + e), 2.0 * tv)};
  loss.saved_bytes = loss.saved_bytes_selective = 4.0 * tv;
  mark_role(loss, KernelRole::LossForward, KernelRole::LossBackward, tv, e, false);
  for (auto* pass : {&loss.forward, &loss.backward}) pass->front().n = vocab;  // the softmax's row
  l.ops.push_back(loss);
  // The input gradient of the vocabulary-split head is summed; under sequence parallelism its
  // sharded input is gathered first.
  l.tensor_split.backward_sums += 1;
  l.tensor_split.forward_gathers += 1;
}

Layer head_layer(const TransformerSpec& s, const BuildOptions& o, double e) {
  const Slice x = slice(s, o, e);
  Layer l{"head", LayerKind::Head, {}, x.th_local * e};
  l.tensor_split.bytes = x.th * e;
  head_ops(l, s, o, x, "", false);
  return l;
}

// Multi-token prediction module `depth` (DeepSeek-V3 report, arXiv:2412.19437, Sec. 2.2;
// Megatron-Core transformer/multi_token_prediction.py, MultiTokenPredictionLayer): the next
// token's embedding (the model's table, shared: the first and last stages sum its gradients) and
// the previous depth's output, each normed (enorm, hnorm), concatenated and projected from 2h to
// h by a column-parallel linear whose output is gathered, then a transformer block (an MoE one
// where the model's last block is), and the model's final norm, output layer and loss again.
Layer mtp_layer(const TransformerSpec& s, const BuildOptions& o, double e, I depth) {
  const Slice x = slice(s, o, e);
  Layer l{"mtp." + std::to_string(depth), LayerKind::Block, {}, x.th_local * e};
  l.mtp = true;
  Op emb = embedding_layer(s, o, e).ops.front();
  emb.name = "mtp.embedding";
  emb.params = 0;
  emb.tensors.clear();
  l.ops.push_back(emb);
  for (const char* name : {"mtp.enorm", "mtp.hnorm"}) {
    Op n = norm(name, s, o, x.th_local, e);
    n.params /= x.t;
    l.ops.push_back(n);
  }
  l.ops.push_back(block_linear("mtp.eh_proj", x.tokens, 2 * x.h, x.h / o.tensor, e, false, x, x.gathered_split));
  const Layer block = block_layer(s, o, e, s.num_layers - 1);
  const std::size_t offset = l.ops.size();
  for (const auto& op : block.ops) l.ops.push_back(op);
  l.experts = block.experts.shifted(offset);
  l.context_kv_bytes = block.context_kv_bytes;
  l.output_bytes = block.output_bytes;
  l.tensor_split = block.tensor_split;
  l.rerun_tp_pairs = block.rerun_tp_pairs;
  // The embedding's partial lookups summed; the projection's output gathered forward (priced as
  // one more sum of the activation) and its 2h-wide input gradient summed backward.
  l.tensor_split.forward_sums += 2;
  l.tensor_split.backward_sums += 2;
  head_ops(l, s, o, x, "mtp.", true);
  return l;
}

// ViT: the final norm, then a classifier on the class token alone (replicated on every tensor
// rank) and the loss over the classes.
Layer classifier_layer(const TransformerSpec& s, const BuildOptions& o, double e) {
  const Slice x = slice(s, o, e);
  Layer l{"head", LayerKind::Head, {}, x.th_local * e};
  Op fn = norm("final_norm", s, o, x.th_local, e);
  fn.params /= x.t;
  l.ops.push_back(fn);
  l.ops.push_back(linear("classifier", o.micro_batch, s.hidden_size, s.classes, e, true));
  const double logits = static_cast<double>(o.micro_batch * s.classes);
  Op loss;
  loss.name = "cross_entropy";
  loss.forward = {memory("cross_entropy", logits * (e + 4.0), 5.0 * logits)};
  loss.backward = {memory("cross_entropy.bwd", logits * (4.0 + e), 2.0 * logits)};
  loss.saved_bytes = loss.saved_bytes_selective = 4.0 * logits;
  mark_role(loss, KernelRole::LossForward, KernelRole::LossBackward, logits, e, false);
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
  // A block depends on its index only through its name and whether it is an MoE block: each run
  // of like blocks is built once and copied (building GPT-3's 96 op by op was a tenth of a sweep).
  for (I i = 0; i < spec.num_layers; ++i) {
    if (i == 0 || spec.moe_block(i) != spec.moe_block(i - 1)) {
      g.layers.push_back(block_layer(spec, options, e, i));
      continue;
    }
    Layer copy = g.layers.back();
    copy.name = "block." + std::to_string(i);
    g.layers.push_back(std::move(copy));
  }
  for (I d = 1; d <= spec.mtp_layers; ++d) g.layers.push_back(mtp_layer(spec, options, e, d));
  g.layers.push_back(spec.vision() ? classifier_layer(spec, options, e) : head_layer(spec, options, e));
  // A tied output layer, or multi-token prediction's lookups, share the embedding table.
  if ((spec.tied_embeddings || spec.mtp_layers > 0) && !spec.vision()) g.tied_params = g.layers.front().ops.front().params;
  return g;
}

}  // namespace dtsim::models