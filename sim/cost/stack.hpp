#pragma once
// The software stack a step runs on (issue 30): which attention kernel it calls and how many
// element-wise kernels its framework launches. One registered unit per preset; each mechanism
// lives in its own file (attention_rates.cpp, eager_kernels.cpp) and is priced here.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "strategies/stack_memory_kinds.hpp"
#include "strategies/tensor_fusion.hpp"

#include "sim/taskgraph/task_graph.hpp"

namespace dtsim::cost {

// gemm-curve: the attention kernel at the device's GEMM curve (dtsim's behaviour before stacks).
// flash2: Dao-AILab's flash-attn package; sdpa-flash: the FlashAttention-2 PyTorch vendors as
// SDPA's flash backend (attention_rates.cpp).
enum class AttentionImpl { GemmCurve, Flash2, Flash3, Cudnn, SdpaMath, SdpaFlash };
// fused: the model's own element-wise kernels, one per op (dtsim's behaviour before stacks).
enum class Elementwise { Fused, Eager, Compiled };
// How DeepSpeed's ZeRO-3 gathers and reduces: coalesced (today's, and dtsim's before stacks), or
// tensor by tensor with a device synchronisation before each gather (0.3.13-0.5.10;
// strategies::FrameworkSpec::per_parameter).
enum class Zero3Gathers { Coalesced, PerParameter };
// The loss over the logits (loss_kernels.cpp): fused, the model's own kernel (dtsim's behaviour
// before stacks); eager-fp32, PyTorch's F.cross_entropy on logits cast to fp32; compiled, the same
// under Inductor. What each keeps in memory: strategies/stack_memory.cpp.
using Loss = strategies::Loss;
// The copies and casts around a fused attention call (attention_copies.cpp): fused, none beyond
// the model's kernels (dtsim's behaviour before stacks), or eager, the QKV split's copies and
// RoPE's fp32 casts and complex multiply as eager PyTorch runs torchtitan's Llama; rotate-half,
// HF's apply_rotary_pos_emb (and scripts/gpu_train.py): x * cos + cat(-x2, x1) * sin on the
// transposed q and k, with the fused QKV output's split backward.
enum class Copies { Fused, Eager, RotateHalf };
// One memory-bound kernel a stack runs in place of, or beside, a model kernel: the bytes it reads
// and writes, and whether it casts each element up (bf16 to fp32: models::KernelRole::CastUp).
// unvectorised_elems: the elements of a kernel ATen runs on its scalar path (an operand broadcast
// along rows, or a cast between types), which no more than the device's cast-up rate in elements
// drives (device profile cast_up_bandwidth, over the 6 bytes a bf16-to-fp32 cast moves per
// element; stack.cpp memory_pass_seconds); 0: a vectorised kernel.
struct MemoryPass {
  double bytes = 0;
  bool cast_up = false;
  double unvectorised_elems = 0;
  bool operator==(const MemoryPass&) const = default;
};
// The shapes the stack hands cuBLAS (gemm_alignment.cpp): curve, every GEMM at the device's curve
// whatever its shape (dtsim's behaviour before stacks); as-written, the model's shapes, so a
// dimension that is not a multiple of 16 bytes runs off the fast kernels on a device whose
// profile says gemm_alignment "cublas"; padded, torch.compile's Inductor rounds m, n and k up to
// 16 bytes (pad_mm.py) and runs the padded FLOPs on the fast kernels.
enum class GemmShapes { Curve, AsWritten, Padded };
// What PyTorch FSDP does with an all-gather's output: none, the output is the parameters' storage
// (FSDP1's flat parameter, and dtsim's behaviour before stacks); copy-out, FSDP2 copies it into each
// parameter's unsharded tensor on the compute stream (strategies::FrameworkSpec::gather_copy_out).
enum class GatherCopies { None, CopyOut };
// How an eager stack runs RMSNorm (norm_kernels.cpp): fused, one ATen kernel each way (F.rms_norm
// from PyTorch 2.9, as LayerNorm always; dtsim's behaviour before stacks); composite, the ops it
// is written as (torchtitan's and HF's RMSNorm, nn.RMSNorm up to PyTorch 2.8). Its memory:
// models::BuildOptions::rms_norm_ops.
enum class NormImpl { Fused, Composite };
// How an eager stack's SwiGLU gets its two halves (swiglu_kernels.cpp): chunked, views of one
// GEMM's output (Megatron-LM unfused, scripts/gpu_train.py; dtsim's eager kernels before this key),
// or separate, two GEMMs' outputs (torchtitan, HF).
enum class Swiglu { Chunked, Separate };

struct Stack {
  std::string name = "default";
  AttentionImpl attention = AttentionImpl::GemmCurve;
  Elementwise elementwise = Elementwise::Fused;
  // Host time to launch one kernel. The GPU waits for it only when the kernel before is shorter
  // (the host runs ahead otherwise), so each kernel takes at least this long. 0: not modelled.
  double dispatch_s = 0;
  // Communication interference (comm_interference.cpp): SMs a collective's kernels hold while it
  // is in flight, which compute on that GPU loses. kDeviceCommSms: the device profile's nccl_sms.
  int comm_sms = 0;
  // How tensor-parallel collectives overlap the GEMMs beside them (strategies/tp_overlap.cpp).
  taskgraph::TpOverlap tp_overlap = taskgraph::TpOverlap::None;
  // What the stack keeps in GPU memory: optimizer buffers, FP8 weight copies, allocator
  // (strategies/stack_memory.hpp; docs/memory.md); its `loss` also sets the loss's kernels
  // (loss_kernels.cpp).
  strategies::StackMemory memory;
  // The deepspeed presets: which ZeRO-3 DeepSpeed runs; they need parallelism.framework "deepspeed".
  Zero3Gathers zero3_gathers = Zero3Gathers::Coalesced;
  bool needs_deepspeed = false;
  Copies copies = Copies::Fused;
  GemmShapes gemm_shapes = GemmShapes::Curve;
  GatherCopies gather_copies = GatherCopies::None;
  NormImpl norm = NormImpl::Fused;
  Swiglu swiglu = Swiglu::Chunked;
  // Megatron-LM's --make-vocab-size-divisible-by: the vocabulary is padded to a multiple of this
  // times the tensor-parallel size before the model is built (sim/config/stack_config.cpp). 0: the
  // model's vocabulary as given.
  std::int64_t vocab_divisible_by = 0;
  // The horovod presets: gradients in Horovod's fusion buffers, cut by its cycle (cycle, threshold
  // and response cache; strategies/tensor_fusion.hpp) instead of DDP's buckets.
  strategies::TensorFusion fusion{};
  // Megatron-LM's data-parallel gradient buffer in bytes per element (strategies/framework.hpp
  // grad_buffer_bytes): 4 for the megatron-te presets (fp32 main gradients under bf16); 0: the
  // gradient's own dtype. Applies with parallelism.framework "megatron-lm" and bf16 or fp8 weights.
  int grad_buffer_bytes = 0;
  // Bytes per gradient element ZeRO-3's reduce-scatters carry (strategies::FrameworkSpec::reduce_bytes)
  // where the scenario's parallelism.zero3.reduce_dtype does not say: 4 for torchtitan's FSDP2
  // (MixedPrecisionPolicy reduce_dtype float32); 0: the gradients' own dtype.
  int zero3_reduce_bytes = 0;
  // A linear layer's bias gradient: summed over tokens inside the weight-gradient GEMM (Transformer
  // Engine's cuBLASLt BGRADB epilogue) or, false, as a reduction kernel of its own (autograd's
  // grad.sum(0), Megatron-LM's local layers and fused bias-GeLU / bias-dropout-add backwards).
  bool bias_grad_in_gemm = false;
  bool is_default() const {
    return attention == AttentionImpl::GemmCurve && elementwise == Elementwise::Fused && dispatch_s == 0 && comm_sms == 0 &&
           tp_overlap == taskgraph::TpOverlap::None && memory.loss == Loss::Fused &&
           copies == Copies::Fused && gemm_shapes == GemmShapes::Curve;
  }
};
inline constexpr int kDeviceCommSms = -1;

const char* to_string(AttentionImpl a);
const char* to_string(Elementwise e);
std::optional<AttentionImpl> attention_impl_from_string(const std::string& s);
std::optional<Elementwise> elementwise_from_string(const std::string& s);
const char* to_string(taskgraph::TpOverlap t);
std::optional<taskgraph::TpOverlap> tp_overlap_from_string(const std::string& s);
const char* to_string(Zero3Gathers z);
const char* to_string(Copies c);
const char* to_string(GemmShapes g);
const char* to_string(GatherCopies g);
const char* to_string(NormImpl n);
const char* to_string(Swiglu s);
std::optional<GemmShapes> gemm_shapes_from_string(const std::string& s);

// The registered presets: default, pytorch-eager, pytorch-eager-2.8, torchtitan-compile, torchtitan-async-tp, megatron-te,
// megatron-te-tp-overlap, llm-foundry, deepspeed, deepspeed-0.5, horovod, horovod-0.16, jax-xla.
std::vector<std::string> stack_names();
std::optional<Stack> find_stack(const std::string& name);

}  // namespace dtsim::cost
