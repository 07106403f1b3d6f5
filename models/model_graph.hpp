#pragma once
#include <cstdint>
#include <string>
#include <vector>

// The op graph of a model: what each layer computes, stores and owns. No hardware, no strategy.
namespace dtsim::models {

enum class Mlp { Gelu, SwiGlu };
enum class Norm { LayerNorm, RmsNorm };
enum class PositionEmbedding { Learned, Rotary };
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
  bool dropout = true;
};

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
};

enum class KernelKind { Gemm, Attention, Memory };

// One kernel launch. GEMMs keep their shape so a measured kernel table can be looked up by it.
struct Kernel {
  std::string name;
  KernelKind kind = KernelKind::Memory;
  std::int64_t batch = 1, m = 0, n = 0, k = 0;
  double flops = 0;
  double bytes = 0;
  // Reads or writes a materialised attention score matrix (b x heads x s x s): such kernels
  // stream it less well than a simple copy does.
  bool scores = false;
};

struct Op {
  std::string name;
  std::vector<Kernel> forward, backward;
  double params = 0;
  double saved_bytes = 0;            // kept from forward for backward, per micro-batch
  double saved_bytes_selective = 0;  // what stays saved under selective recomputation
  bool selective = false;            // re-run in backward under selective recomputation
  bool matmul = false;               // counts in model FLOPs
};

enum class LayerKind { Embedding, Block, Head };

struct Layer {
  std::string name;
  LayerKind kind = LayerKind::Block;
  std::vector<Op> ops;
  double input_bytes = 0;  // the activation entering the layer (full-recompute checkpoint)

  double params() const;
  double forward_flops() const;
  double saved_bytes() const;
};

struct ModelGraph {
  TransformerSpec spec;
  BuildOptions options;
  std::vector<Layer> layers;

  double params() const;
  // Forward + backward matmul FLOPs of one micro-batch, without recomputation (Korthikanti Eq. 7
  // counts the same GEMMs), i.e. the "model FLOPs" of MFU.
  double model_flops() const;
  std::int64_t tokens() const { return options.micro_batch * spec.seq_len; }
};

ModelGraph build_transformer(const TransformerSpec& spec, const BuildOptions& options);

// Closed forms used to check the graph: Megatron (Narayanan et al. 2021) Eq. 2 parameter count,
// and the per-layer activation bytes of Korthikanti et al. 2022 (Table 2, no parallelism).
double megatron_eq2_params(const TransformerSpec& s);
double korthikanti_layer_activation_bytes(const TransformerSpec& s, std::int64_t micro_batch);
// Korthikanti et al. 2022, Table 2: with tensor parallelism t, sbh(10 + 24/t + 5as/(ht)); with
// sequence parallelism too, sbh/t (34 + 5as/h).
double korthikanti_layer_activation_bytes(const TransformerSpec& s, std::int64_t micro_batch, std::int64_t t, bool sp);

enum class OptimizerKind { Adam, Sgd };

// How a step updates the weights: in fp32, or 16-bit weights from fp32 master copies. With bf16
// the gradients accumulate in fp32; with fp16 they are 16-bit, scaled by the loss scale.
enum class UpdatePath { Fp32, Bf16Master, Fp16Master };

// The optimizer step over `params` parameters, as the passes a mixed-precision optimizer makes
// over them (Megatron-LM's Float16Optimizer; DeepSpeed's FP16 optimizer is alike), priced as one
// memory-bound kernel.
Kernel optimizer_kernel(OptimizerKind kind, double params, UpdatePath path);

// Adding one micro-batch's weight gradients of `params` parameters into the accumulation buffer
// when the GEMM does not write into it directly: read both, write the buffer.
Kernel grad_accumulate_kernel(double params, int element_bytes);

}  // namespace dtsim::models
