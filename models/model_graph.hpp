#pragma once
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

// The op graph of a model: what each layer computes, stores and owns. No hardware, no strategy.
namespace dtsim::models {

// Gelu and SquaredRelu: two matrices around an element-wise activation (SquaredRelu: relu(x)^2,
// So et al. 2021, Primer; Nemotron-4, Megatron-LM --squared-relu, TE activation "srelu");
// SwiGlu: a gated MLP of three.
enum class Mlp { Gelu, SwiGlu, SquaredRelu };
enum class Norm { LayerNorm, RmsNorm };
// Alibi (Press et al. 2022, "Train Short, Test Long"; BLOOM): no table and no rotation, a bias
// by distance added to the scores inside the attention kernel.
enum class PositionEmbedding { Learned, Rotary, Alibi };
enum class Attention { Standard, Flash };

struct TransformerSpec {
  std::string name;
  std::int64_t num_layers = 0, hidden_size = 0, num_heads = 0, num_kv_heads = 0;
  std::int64_t ffn_hidden_size = 0, seq_len = 0, vocab_size = 0;
  Mlp mlp = Mlp::Gelu;
  bool tied_embeddings = true;
  Norm norm = Norm::LayerNorm;
  bool linear_bias = true;
  PositionEmbedding position_embedding = PositionEmbedding::Learned;
  // A LayerNorm of the embedding's output before the first block (BLOOM's
  // word_embeddings_layernorm; BigScience Megatron-DeepSpeed --embed-layernorm).
  bool embedding_norm = false;
  bool dropout = true;
  // Attention and MLP side by side on one norm of the block's input, y = x + Attn(LN(x)) +
  // MLP(LN(x)) (GPT-J; PaLM, Chowdhery et al. 2022, Sec. 2 "Parallel Layers"), where the sequential
  // block feeds the MLP the attention's output. Dense blocks only (models/transformer.cpp).
  bool parallel_layers = false;
  // QK-norm (Qwen3; OLMo 2; Megatron-Core --qk-layernorm): every query and key head normalised
  // over its head width after the projection, before the rotary embedding and attention.
  bool qk_norm = false;
  // Multi-token prediction modules (DeepSeek-V3, Sec. 2.2; Megatron-Core --mtp-num-layers): each
  // predicts one token further on from the last block's output and the next token's embedding,
  // through its own norms, projection and transformer block and the model's (shared) head.
  std::int64_t mtp_layers = 0;
  // A vision transformer (Dosovitskiy et al. 2021) when patch_size > 0: the image is cut into
  // (image_size / patch_size)^2 patches embedded by a patch_size-strided convolution, a class
  // token joins them (seq_len = patches + 1), attention is bidirectional over all of them, and
  // the head classifies the class token into `classes`. No vocabulary.
  std::int64_t patch_size = 0, image_size = 0, channels = 3, classes = 0;
  bool vision() const { return patch_size > 0; }

  // Mixture of experts (Shazeer et al. 2017; Fedus et al. 2022, Switch; Jiang et al. 2024,
  // Mixtral): when num_experts > 0 the MLP of every block from first_dense_layers on is a router
  // and num_experts expert MLPs of expert_ffn_hidden_size, of which each token goes to
  // experts_per_token, plus shared_experts expert-sized MLPs every token goes through (DeepSeekMoE).
  // capacity_factor > 0 pads each expert to that many times its even share of the tokens
  // (GShard/Switch: the excess is dropped); 0 is dropless (each expert computes what it gets).
  std::int64_t num_experts = 0, experts_per_token = 0, expert_ffn_hidden_size = 0, shared_experts = 0;
  std::int64_t first_dense_layers = 0;
  double capacity_factor = 0;
  bool expert_bias = false;  // biases on the expert GEMMs (gpt-oss)
  // Per-head width when it is not hidden_size / num_heads (Qwen3: 128 with 2048 / 32 = 64).
  std::int64_t head_dim = 0;
  // Multi-head latent attention (DeepSeek-V2/V3) when kv_lora_rank > 0: queries and keys/values
  // go through low-rank down-projections (q_lora_rank, kv_lora_rank, each normed), up-projected
  // per head to qk_nope_head_dim + qk_rope_head_dim (queries, keys) and v_head_dim (values); the
  // rotary key part (qk_rope_head_dim) comes straight from the hidden state, shared by all heads.
  std::int64_t q_lora_rank = 0, kv_lora_rank = 0, qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;
  bool moe() const { return num_experts > 0; }
  bool moe_block(std::int64_t index) const { return moe() && index >= first_dense_layers; }
  bool mla() const { return kv_lora_rank > 0; }
};

// Megatron-Core's fine-grained recomputation (--recompute-granularity selective
// --recompute-modules, megatron/core/transformer/transformer_config.py): the sub-modules backward
// runs again, as bits. Given: the modules were named (even none), so selective recomputation is
// theirs rather than Korthikanti et al.'s attention-score recompute. CoreAttn checkpoints the core
// attention (its inputs Q, K, V kept); Layernorm and MoeAct discard the block norms' and the
// experts' activation's outputs once used and run them again before backward
// (CheckpointWithoutOutput). Mlp, Moe and SharedExperts checkpoint a dense MLP, a whole MoE layer
// (its all-to-alls included) and the shared experts, keeping only their input
// (tensor_parallel.checkpoint); MlaUpProj discards latent attention's up-projected queries, keys
// and values once attention has run and rebuilds them from the latents (CheckpointWithoutOutput).
namespace recompute_module {
inline constexpr std::uint8_t kGiven = 0x80, kCoreAttn = 1, kLayernorm = 2, kMoeAct = 4, kMlp = 8, kMoe = 16,
                              kSharedExperts = 32, kMlaUpProj = 64;
}

// How FP8 tensors are scaled (Transformer Engine's recipes; Megatron-Core --fp8-recipe): Delayed
// by an amax history per tensor, Current by each tensor's own amax (an extra read), Blockwise by
// one scale per 1 x 128 tile of activations and gradients and per 128 x 128 block of weights
// (DeepSeek-V3 report, arXiv:2412.19437, Sec. 3.3.2; TE's Float8BlockScaling), found in the
// cast's own pass, the GEMM applying the scales as it accumulates; Mx (MXFP8, OCP Microscaling)
// by an E8M0 byte per 32 elements along the contraction, which Blackwell's tensor cores take as
// operands at their FP8 rate (Megatron-Core --fp8-recipe mxfp8).
enum class Fp8Scaling { Delayed, Current, Blockwise, Mx };

// How the graph is instantiated: per micro-batch, in one activation precision.
struct BuildOptions {
  std::int64_t micro_batch = 1;
  int activation_bytes = 2;  // bytes per element of activations and 16-bit weights
  Attention attention = Attention::Standard;
  // Megatron tensor parallelism: the slice one of `tensor` ranks holds and computes (Shoeybi et
  // al. 2019): column-parallel QKV and fc1, row-parallel output and fc2, heads split, vocabulary
  // split. Sequence parallelism also splits norms, dropouts and the saved GEMM inputs by tokens
  // (Korthikanti et al. 2022).
  std::int64_t tensor = 1;
  bool sequence_parallel = false;
  // Transformer Engine FP8: the blocks' linear layers run FP8 GEMMs on FP8 casts of their inputs,
  // weights and output gradients (strategies::Precision::Fp8).
  bool fp8 = false;
  Fp8Scaling fp8_scaling = Fp8Scaling::Delayed;
  // Context parallelism (Megatron-Core, Llama 3): each of `context` ranks holds 1/context of the
  // sequence's tokens and attends with its queries over all keys. Balanced: each rank holds chunks
  // i and 2*context-1-i of the causal sequence, so every rank does the same attention work;
  // otherwise rank i holds chunk i and the last one does (2*context-1)/context times the average.
  std::int64_t context = 1;
  bool context_balanced = true;
  // Expert parallelism (Megatron-Core): the experts of an MoE layer split over `expert` ranks, each
  // holding num_experts / expert of them and computing the tokens all ranks route to them.
  std::int64_t expert = 1;
  // Expert tensor parallelism (Megatron-Core --expert-tensor-parallel-size): each expert's MLP
  // split over this many ranks; 0: over `tensor`, as the dense MLP.
  std::int64_t expert_tensor = 0;
  // RMSNorm written as PyTorch ops and run eagerly (HF's LlamaRMSNorm, torchtitan's RMSNorm,
  // nn.RMSNorm before PyTorch 2.9): autograd keeps the fp32 copy of the input and the normalised
  // output instead of the input (sim/cost/norm_kernels.cpp prices its kernels).
  bool rms_norm_ops = false;
  // recompute_module bits: which ops selective recomputation re-runs and what they keep
  // (Op::selective, Op::saved_bytes_selective); 0: Korthikanti's attention scores.
  std::uint8_t recompute_modules = 0;
};

enum class KernelKind { Gemm, Conv, Attention, Memory };

// The role of a kernel in its block, for the software stack's pricing. Plain: priced as it is.
enum class KernelRole {
  Plain,
  NormForward, NormBackward,          // LayerNorm over tokens x hidden
  RmsNormForward, RmsNormBackward,    // RMSNorm over tokens x hidden
  GeluForward, GeluBackward,          // over tokens x ffn
  SwiGluForward, SwiGluBackward,      // over tokens x ffn (the output's elements)
  ResidualForward, ResidualBackward,  // (dropout and) residual add over tokens x hidden
  FlashForward, FlashBackward,        // fused attention; batch = b x heads, m = queries, n = keys, k = head dim
  BiasWeightGrad,                     // a weight-gradient GEMM of a linear layer with a bias (k = tokens, n = outputs)
  WeightGrad,                         // one without a bias: dW = X^T dY, m = inputs, n = outputs, k = tokens
  SquaredReluForward, SquaredReluBackward,  // over tokens x ffn
  LossForward, LossBackward,                // cross-entropy over tokens x vocabulary (the logits)
  BatchNormForward, BatchNormBackward,      // training-mode batch norm over images x channels x pixels
  CastUp                                    // a copy into a wider type: reads elems x elem_bytes, writes the rest of bytes
};

// The three passes of a convolution (see conv_kernel below).
enum class ConvPass { Forward, Dgrad, Wgrad };

// A 2-D convolution over an NCHW tensor: n images of c channels of h x w, k filters of r x s,
// `groups` channel groups. Output p x q per image.
struct ConvShape {
  std::int64_t n = 0, c = 0, h = 0, w = 0, k = 0, r = 1, s = 1;
  std::int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, groups = 1;
  std::int64_t p() const { return (h + 2 * pad_h - r) / stride_h + 1; }
  std::int64_t q() const { return (w + 2 * pad_w - s) / stride_w + 1; }
  bool operator==(const ConvShape&) const = default;
};

// The tensors around a fused attention call (Flash roles), for a software stack that prices the
// eager copies and casts around it (sim/cost/attention_copies.cpp): this rank's elements of Q and
// of K (V has as many), and the bytes of the rotary table one rotation reads (0: no RoPE).
struct AttentionIo {
  double q = 0, kv = 0, rope_table = 0;
  bool operator==(const AttentionIo&) const = default;
};

// One kernel launch. GEMMs keep their shape so a measured kernel table can be looked up by it.
// A convolution keeps its implicit-GEMM shape in batch/m/n/k (batch = groups, forward:
// m = N*P*Q, n = K/g, k = C/g*R*S) and its geometry in `conv`. A loss kernel keeps the length of
// its softmax's rows (the vocabulary on this rank) in n.
struct Kernel {
  std::string name;
  KernelKind kind = KernelKind::Memory;
  std::int64_t batch = 1, m = 0, n = 0, k = 0;
  double flops = 0;
  double bytes = 0;
  // Reads or writes a materialised attention score matrix (b x heads x s x s): such kernels
  // stream it less well than a simple copy does.
  bool scores = false;
  ConvShape conv{};  // Conv kernels only
  ConvPass pass = ConvPass::Forward;
  bool fp8 = false;  // a GEMM on FP8 operands, priced at the device's FP8 peak
  bool fp8_block = false;  // ... scaled per tile (Fp8Scaling::Blockwise): the block-scaled kernels' rate
  // What the kernel is for, so that a software stack (sim/cost/stack.hpp) can price it by its role
  // (how many kernels its framework launches for it, which attention kernel) without matching names.
  KernelRole role = KernelRole::Plain;
  double elems = 0;       // element-wise roles: elements of the tensor it passes over
  double elem_bytes = 0;  // ... and the bytes of each
  bool causal = false;  // attention roles: the causal mask (flash kernels skip the masked blocks)
  bool dropout = false; // ResidualForward/Backward: a dropout before the add; Flash roles: on the probabilities
  AttentionIo io{};     // Flash roles (elem_bytes: their element size)
  bool operator==(const Kernel&) const = default;
};

// One call eager PyTorch makes where the graph has one op or a part of it: its kernel and the
// tensor it returns.
struct Call {
  Kernel kernel;
  double output_bytes = 0;
  bool operator==(const Call&) const = default;
};

// A Megatron tensor-parallel linear layer: column-parallel (QKV, fc1: the sequence-parallel input
// is gathered before it, its input gradient summed after) or row-parallel (the output projection
// and fc2: its output summed after it, the output gradient gathered before its backward). A
// software stack overlaps those collectives with the layer's GEMMs (strategies/tp_overlap.hpp).
enum class TpLinear : std::uint8_t { None, Column, Row };

struct Op {
  std::string name;
  std::vector<Kernel> forward, backward;
  double params = 0;
  double saved_bytes = 0;            // kept from forward for backward, per micro-batch
  double saved_bytes_selective = 0;  // what stays saved under selective recomputation
  bool selective = false;            // re-run in backward under selective recomputation
  bool reads_norm = false;           // its input is the block norm's output, which it saves
  bool matmul = false;               // counts in model FLOPs
  bool context_attention = false;    // the fused attention context parallelism overlaps its K/V exchange with
  TpLinear tp_linear = TpLinear::None;
  // Expert weights: split over the expert-parallel ranks, their gradients summed over the
  // expert-data-parallel ones. The rest of a model is dense.
  bool expert = false;
  // Share of the matmul FLOPs that count as model FLOPs: capacity padding computes zeros.
  double useful = 1.0;
  // The op's parameter tensors as the framework sees them (a linear's weight and bias, a
  // LayerNorm's weight and bias), in elements; empty: one tensor of `params`. Frameworks that
  // gather or reduce tensor by tensor (DeepSpeed before 0.6) read them through param_tensors().
  std::vector<double> tensors;
  // A linear layer's matmuls and fused attention as separate calls, in the order a framework
  // without fused projections runs them (torchtitan's Llama: the QKV projection is wq, wk and wv,
  // the gate-and-up projection w1 and w3). Op-level checkpointing saves or recomputes them one by
  // one (strategies/recompute.hpp). Empty for other ops.
  std::vector<Call> calls;
  bool operator==(const Op&) const = default;
};

// Where a layer sits: the model's input layer (a transformer's embedding, a CNN's stem when it is
// not a block), the repeated body that pipeline stages share and full recomputation re-runs, and
// the output layer (head and loss). The input layer goes to the first stage, the head to the last.
enum class LayerKind { Embedding, Block, Head };

// How tensor (model) parallelism splits a layer across the `tensor` ranks of a group, as the
// collectives one pass of the layer blocks on. Each moves `bytes`, the whole activation of one
// micro-batch. A partial result summed across the group is an all-reduce, or a reduce-scatter
// under sequence parallelism, which also all-gathers the sequence-sharded inputs (Megatron:
// Shoeybi et al. 2019; Korthikanti et al. 2022).
struct TensorSplit {
  bool splittable = true;  // false: tensor parallelism cannot split this layer
  double bytes = 0;
  double forward_sums = 0, backward_sums = 0;        // partial results summed across the group
  double forward_gathers = 0, backward_gathers = 0;  // sharded inputs gathered (sequence parallel only)
  // A CNN split by output channels (Krizhevsky et al. 2012, section 3.2), with or without sequence
  // parallelism: the whole bytes of each channel-split input gathered before an op that reads
  // every channel (forward), and of each such input's gradient, partial over this rank's output
  // channels, reduce-scattered back to the ranks' channel shares (backward). One entry each.
  std::vector<double> channel_gathers, channel_sums;
  bool operator==(const TensorSplit&) const = default;
};

// A mixture-of-experts layer: ops [first, last) run on the tokens routed to this GPU's experts.
// Under expert parallelism an all-to-all over the expert-parallel group dispatches the tokens
// before them and another combines the results after (and both again, reversed, in backward).
struct ExpertSplit {
  std::size_t first = 0, last = 0;  // first == last: not an MoE layer
  double dispatch_bytes = 0;        // the all-to-all buffer: tokens x experts_per_token x hidden
  std::int64_t local_experts = 0;   // experts on this GPU
  double active_share = 1.0;        // of the expert parameters, the share one token uses (top-k / experts)
  double capacity = 0;              // the capacity factor each expert is padded to; 0: dropless
  // The shared experts' ops: [shared_first, shared_fc2) their input projection and activation,
  // [shared_fc2, shared_last) their output projection (none when equal).
  std::size_t shared_first = 0, shared_fc2 = 0, shared_last = 0;
  // The MoE layer's first op (its router): what Megatron-Core's moe recompute module re-runs runs
  // from here to the shared experts' end.
  std::size_t module = 0;
  bool moe() const { return last > first; }
  bool has_shared() const { return shared_last > shared_first; }
  // One past the MoE layer's last op: the un-permutation after the experts, or the shared experts.
  std::size_t module_end() const { return has_shared() ? shared_last : last + 1; }
  // The same split with `offset` ops before the layer's (a module that embeds a block).
  ExpertSplit shifted(std::size_t offset) const {
    ExpertSplit out = *this;
    if (!moe()) return out;
    for (auto* i : {&out.first, &out.last, &out.shared_first, &out.shared_fc2, &out.shared_last, &out.module}) *i += offset;
    return out;
  }
  bool operator==(const ExpertSplit&) const = default;
};

// A layer's ops, shared by the layers built alike (a transformer's blocks) until one of them is
// changed: copying a layer copies a pointer, not every op's kernels and names (a sweep builds
// dozens of 96-block graphs, and copying and freeing their ops was a third of its time). Read
// like a vector; anything that may change an op first takes a copy of its own.
class OpList {
 public:
  using value_type = Op;
  using iterator = std::vector<Op>::iterator;
  using const_iterator = std::vector<Op>::const_iterator;

  OpList() = default;
  OpList(std::initializer_list<Op> ops) : ops_(std::make_shared<std::vector<Op>>(ops)) {}

  std::size_t size() const { return ops_ ? ops_->size() : 0; }
  bool empty() const { return size() == 0; }
  const Op& operator[](std::size_t i) const { return (*ops_)[i]; }
  Op& operator[](std::size_t i) { return own()[i]; }
  const Op& front() const { return ops_->front(); }
  Op& front() { return own().front(); }
  const Op& back() const { return ops_->back(); }
  Op& back() { return own().back(); }
  const Op* data() const { return ops_ ? ops_->data() : nullptr; }
  const_iterator begin() const { return ops_ ? ops_->cbegin() : const_iterator{}; }
  const_iterator end() const { return ops_ ? ops_->cend() : const_iterator{}; }
  iterator begin() { return own().begin(); }
  iterator end() { return own().end(); }
  auto rbegin() const { return std::make_reverse_iterator(end()); }
  auto rend() const { return std::make_reverse_iterator(begin()); }
  void push_back(Op op) { own().push_back(std::move(op)); }
  bool operator==(const OpList& o) const {
    return ops_ == o.ops_ || (size() == o.size() && std::equal(begin(), end(), o.begin()));
  }

 private:
  std::vector<Op>& own() {
    if (!ops_) ops_ = std::make_shared<std::vector<Op>>();
    else if (ops_.use_count() > 1) ops_ = std::make_shared<std::vector<Op>>(*ops_);
    return *ops_;
  }
  std::shared_ptr<std::vector<Op>> ops_;
};

struct Layer {
  std::string name;
  LayerKind kind = LayerKind::Block;
  OpList ops;
  double input_bytes = 0;  // the activation entering the layer (full-recompute checkpoint)
  // The tensor this layer hands to the next, whole (all tensor ranks together), per micro-batch:
  // what a pipeline stage boundary after this layer sends forward, and its gradient backward.
  double output_bytes = 0;
  TensorSplit tensor_split{};
  // K and V of this rank's share of the sequence (one tensor rank's heads), per micro-batch: what
  // context parallelism passes around its ring or all-gathers. 0 when the layer has no attention.
  double context_kv_bytes = 0;
  // Tensor-parallel linear pairs (a gather and a sum of tensor_split.bytes, forward) that selective
  // recomputation's modules run again before backward: a checkpointed dense MLP, MoE layer or
  // shared experts re-runs its column- and row-parallel linears' collectives.
  double rerun_tp_pairs = 0;
  ExpertSplit experts{};
  // A multi-token prediction module (a block of its own after the model's blocks, on the chunk
  // of the head): not one of the model's blocks when they are split into chunks.
  bool mtp = false;

  double params() const;
  double expert_params() const;  // of params(), those of Op::expert ops
  double forward_flops() const;
  double saved_bytes() const;
  // Every field, the name included (the closed form prices blocks that differ only by name once).
  bool operator==(const Layer&) const = default;
};

// A model as strategies see it, whatever its family: layers in order, each with its kernels,
// parameters, saved bytes, handed-on tensor and split rule. Strategies read nothing else.
struct ModelGraph {
  std::string name;
  BuildOptions options;
  std::vector<Layer> layers;
  // Parameters the first and last layer share (a tied embedding and output layer): when they sit
  // on different pipeline stages, those stages sum their gradients.
  double tied_params = 0;

  double params() const;
  // Parameters one token's forward uses: the dense ones and its experts' share. With
  // `input_embedding` false the input embedding table (a row lookup) is left out, as OpenAI
  // counts gpt-oss's active parameters.
  double active_params(bool input_embedding = true) const;
  // Forward + backward matmul FLOPs of one micro-batch, without recomputation (Korthikanti Eq. 7
  // counts the same GEMMs), i.e. the "model FLOPs" of MFU.
  double model_flops() const;
};

ModelGraph build_transformer(const TransformerSpec& spec, const BuildOptions& options);

// An expert kernel for `factor` times the tokens its GPU gets on average (a skewed router): GEMMs
// grow along their token dimension (m, or k for the weight gradient), memory kernels in bytes.
Kernel scale_expert_tokens(const Kernel& k, double factor);

// Closed forms used to check the graph: Megatron (Narayanan et al. 2021) Eq. 2 parameter count,
// and the per-layer activation bytes of Korthikanti et al. 2022 (Table 2, no parallelism).
double megatron_eq2_params(const TransformerSpec& s);
double korthikanti_layer_activation_bytes(const TransformerSpec& s, std::int64_t micro_batch);
// Korthikanti et al. 2022, Table 2: with tensor parallelism t, sbh(10 + 24/t + 5as/(ht)); with
// sequence parallelism too, sbh/t (34 + 5as/h).
double korthikanti_layer_activation_bytes(const TransformerSpec& s, std::int64_t micro_batch, std::int64_t t, bool sp);

// The three passes of a convolution, each one implicit GEMM per group (the im2col formulation;
// cuDNN's implicit-GEMM algorithms compute the same products without the column buffer):
//   forward  Y[NPQ x K/g]      = col(X)[NPQ x C/g*R*S] . W[C/g*R*S x K/g]
//   dgrad    dcol[NPQ x C/g*R*S] = dY[NPQ x K/g] . W^T            (then col2im into dX)
//   wgrad    dW[C/g*R*S x K/g] = col(X)^T . dY                     (reduced over NPQ)
// Each does 2*N*P*Q*K*C*R*S/g FLOPs and moves X, W and Y (or their gradients) once.
Kernel conv_kernel(const std::string& name, const ConvShape& c, ConvPass pass, double element_bytes);

enum class OptimizerKind { Adam, Sgd };

// How a step updates the weights: in fp32, or 16-bit weights from fp32 master copies. With bf16
// the gradients accumulate in fp32; with fp16 they are 16-bit, scaled by the loss scale.
// Fp64 makes the fp32 passes over 8-byte values.
enum class UpdatePath { Fp32, Bf16Master, Fp16Master, Fp64 };

// The optimizer step over `params` parameters, as the passes a mixed-precision optimizer makes
// over them (Megatron-LM's Float16Optimizer; DeepSpeed's FP16 optimizer is alike), priced as one
// memory-bound kernel.
Kernel optimizer_kernel(OptimizerKind kind, double params, UpdatePath path);

// Adding one micro-batch's weight gradients of `params` parameters into the accumulation buffer
// when the GEMM does not write into it directly: read both, write the buffer.
Kernel grad_accumulate_kernel(double params, int element_bytes);

// Op's parameter tensors summing to op.params: its `tensors` scaled to the op's parameters
// (tensor parallelism divides a replicated norm's), one tensor when it lists none, none when
// it has no parameters (a tied head).
std::vector<double> param_tensors(const Op& op);

}  // namespace dtsim::models
