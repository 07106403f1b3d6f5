#include "sim/cost/stack.hpp"

#include <algorithm>
#include <map>

#include "sim/cost/attention_copies.hpp"
#include "sim/cost/attention_rates.hpp"
#include "sim/cost/attention_waves.hpp"
#include "sim/cost/batch_norm_kernels.hpp"
#include "sim/cost/eager_kernels.hpp"
#include "sim/cost/gemm_alignment.hpp"
#include "sim/cost/loss_kernels.hpp"
#include "sim/cost/fused_norm_rates.hpp"
#include "sim/cost/norm_kernels.hpp"
#include "sim/cost/swiglu_kernels.hpp"
#include "sim/cost/roofline.hpp"

namespace dtsim::cost {

namespace {

// Host time per kernel launch, /work/shared/calibration/microbench/dispatch.json:
// - eager PyTorch: 7 us per ATen pointwise call on a tiny CUDA tensor (disp-026). This run's H100
//   host measured 10.7 us per op (docs/gpu_check.md, "Launch overhead"): a check, not used.
// - torch.compile: 6.8 us per Triton kernel through Inductor's CachingAutotuner.run (disp-009,
//   GB200's host; cuLaunchKernel alone is 3.0 of it, disp-015).
constexpr double kEagerDispatchS = 7e-6;
constexpr double kInductorDispatchS = 6.8e-6;

// The GEMM shapes each stack hands cuBLAS (gemm_alignment.cpp):
// - eager PyTorch (and HF, llm-foundry) runs the model as written: an unaligned dimension reaches
//   cuBLAS as it is.
// - torch.compile's Inductor pads m, n and k of every mm/addmm/bmm to 16 bytes when its benchmark
//   finds the padded GEMM faster (torch/_inductor/fx_passes/pad_mm.py @017943b: can_pad,
//   get_padded_length, should_pad; config.shape_padding defaults to on, TORCHINDUCTOR_SHAPE_PADDING
//   "1", torch/_inductor/config.py @000091c). At cuBLAS's unaligned rates (>= 1.46x slower) it
//   always is, so the compiled presets are priced padded.
// - Megatron-LM pads the vocabulary to make_vocab_size_divisible_by (128 by default) times the
//   tensor-parallel size (megatron/training/vocab_utils.py calculate_padded_vocab_size,
//   arguments.py --make-vocab-size-divisible-by; NVIDIA/Megatron-LM @d98e8a6), as Megatron-DeepSpeed
//   does (megatron/tokenizer/tokenizer.py _vocab_size_with_padding, microsoft/Megatron-DeepSpeed
//   @1d6bce0); its other dimensions are the model's as written.
Stack megatron_shapes(Stack s) {
  s.gemm_shapes = GemmShapes::AsWritten;
  s.vocab_divisible_by = 128;
  return s;
}

Stack eager_shapes(Stack s) {
  s.gemm_shapes = GemmShapes::AsWritten;
  return s;
}

Stack compiled_shapes(Stack s) {
  s.gemm_shapes = GemmShapes::Padded;
  return s;
}

// Every stack but the default runs its data-parallel, pipeline and expert collectives through
// NCCL, whose kernels hold SMs while they run: kDeviceCommSms takes the device profile's count.
// Memory: PyTorch runs on its caching allocator unless PYTORCH_ALLOC_CONF says otherwise;
// torchtitan's run_train.sh (pytorch/torchtitan @0168bd5) sets "expandable_segments:True".
// torchtitan's Float8 (torchao Float8Linear) casts each weight per use, FP8-all-gathered under FSDP2
// (torchao float8/fsdp_utils.py, fsdp_pre_all_gather casts the shard), and keeps no FP8 copy
// between micro-batches; Transformer Engine caches the FP8 weight and its transpose on the module
// (te/pytorch/module/linear.py, get_weight_workspace with cache_name "weight").
// DeepSpeed (with Megatron-DeepSpeed's model code): Megatron's fused element-wise kernels, the
// model's own attention kernels (training.attention), eager PyTorch's launch per kernel, NCCL's
// SMs, and the buffers its optimizers allocate (strategies/stack_memory.cpp) under PyTorch's
// caching allocator. The versions differ in how ZeRO-3 gathers: tensor by tensor with a device
// synchronisation before each up to 0.5.10 (v0.5.10, 2022-01; partition_parameters.py
// _allgather_param calls torch.cuda.synchronize(), stage3.py fetch_sub_module), coalesced and
// prefetched from 0.6.0 (PR #1453, partitioned_param_coordinator.py).
Stack deepspeed(const std::string& name, Zero3Gathers z) {
  constexpr strategies::StackMemory kMemory{strategies::StateBuffers::Framework, strategies::Fp8WeightCopies::CopyAndTranspose,
                                            strategies::Allocator::PytorchCaching};
  Stack s{name, AttentionImpl::GemmCurve, Elementwise::Fused, kEagerDispatchS, kDeviceCommSms, taskgraph::TpOverlap::None, kMemory};
  s.zero3_gathers = z;
  s.needs_deepspeed = true;
  return megatron_shapes(s);
}

// Megatron-Core keeps fp32 main gradients under bf16 and reduces them in fp32
// (megatron/training/arguments.py @d98e8a6: accumulate_allreduce_grads_in_fp32 = True unless
// --grad-reduce-in-bf16; core/distributed/param_and_grad_buffer.py allocates the buffer in
// grad_dtype = torch.float if grad_reduce_in_fp32).
Stack megatron_core(Stack s) {
  s.grad_buffer_bytes = 4;
  return s;
}

// Transformer Engine's Linear sums the bias gradient in the weight-gradient GEMM: cuBLASLt's
// CUBLASLT_EPILOGUE_BGRADB when the GEMM is asked for a gradient with a bias
// (transformer_engine/common/gemm/cublaslt_gemm.cu).
Stack te_bias_grad(Stack s) {
  s.bias_grad_in_gemm = true;
  return s;
}

// torchtitan shards with FSDP2 (fully_shard): before a unit's forward and again before its
// backward, FSDPParamGroup.wait_for_unshard runs foreach_all_gather_copy_out on the current stream,
// which copies the all-gather's output into each parameter's unsharded tensor
// (torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py and _fsdp_collectives.py, pytorch/pytorch
// @002a76f). It applies with parallelism.framework "fsdp".
// Its mixed precision reduces in fp32: torchtitan's config `mixed_precision_reduce` defaults to
// "float32" and parallelize.py passes it to fully_shard's MixedPrecisionPolicy(reduce_dtype=...),
// so FSDP2's foreach_reduce casts the bf16 gradients into an fp32 reduce-scatter (and HSDP's
// all-reduce across replicas), under framework fsdp and in pipeline stages alike.
Stack fsdp2(Stack s) {
  s.gather_copies = GatherCopies::CopyOut;
  s.zero3_reduce_bytes = 4;
  return s;
}

// What eager PyTorch runs beside the element-wise kernels for torchtitan's code: the loss as
// F.cross_entropy on fp32 logits (loss_kernels.cpp), and the QKV split's copies and RoPE's fp32
// casts around attention (attention_copies.cpp).
Stack eager_torchtitan(Stack s) {
  s.memory.loss = Loss::EagerFp32;
  s.copies = Copies::Eager;
  s.swiglu = Swiglu::Separate;  // FeedForward: w2(F.silu(w1(x)) * w3(x)) (torchtitan/models/llama3/model.py)
  return eager_shapes(s);
}

// Horovod (horovod/horovod, horovod/common/operations.cc): its tensor fusion, with kernels priced
// as the default stack's (TensorFlow's and PyTorch's kernels under Horovod are not modelled).
// - horovod-0.16: v0.16.0 (2019-02): SetTensorFusionThresholdBytes(64 * 1024 * 1024) at line 1838,
//   SetCycleTimeMs(5) at 1846; no response cache (none before v0.17.0). The same 64 MiB and 5 ms from
//   v0.12.0 (2018-03, line 140 and a 5 ms sleep per loop at 1209) through v0.20.
// - horovod: v0.21.0 (2020-11) and later: 128 MiB (442) and 1 ms (450); v0.28.1 (2023-06, the last
//   tag) the same at 519 and 527, the response cache on (SetCacheEnabled(true), 543; capacity 1024,
//   global_state.h 89). Hierarchical all-reduce is off unless HOROVOD_HIERARCHICAL_ALLREDUCE is set
//   (v0.28.1 563-566, v0.16.0 1873).
Stack horovod(const std::string& name, double threshold_mib, double cycle_ms, bool response_cache) {
  Stack s;
  s.name = name;
  s.fusion.threshold_bytes = threshold_mib * 1024 * 1024;
  s.fusion.cycle_s = cycle_ms * 1e-3;
  s.fusion.response_cache = response_cache;
  return s;
}

// JAX/XLA on TPU: one compiled program per step, so no host launch per kernel and XLA's fusion of
// the element-wise chains (as compiled); collectives run on the chips' ICI DMA engines, no cores
// held. Tensor-parallel all-gathers and reduce-scatters run as XLA's collective matmul ("windowed
// einsum", --xla_tpu_enable_windowed_einsum_for_all_gather / _for_reduce_scatter; Wang et al.,
// "Overlap Communication with Dependent Computation via Decomposition in Large Deep Learning
// Models", ASPLOS 2023, on TPU v4): each einsum that needs a gathered operand or a scattered result
// loops over the group's shards, sending one by collective-permute while it multiplies the
// previous; priced as async-tp's chunks (strategies/tp_overlap.cpp), the weight gradients'
// re-gathered inputs left exposed as there.
Stack jax_xla() {
  Stack s;
  s.name = "jax-xla";
  s.elementwise = Elementwise::Compiled;
  s.tp_overlap = taskgraph::TpOverlap::AsyncTp;
  return s;
}

// torchtitan with --compile.enable compiles the loss too (config Compile.components defaults to
// ["model", "loss"]): Inductor's cross-entropy (loss_kernels.cpp; its memory, stack_memory.cpp).
Stack compiled_loss(Stack s) {
  s.memory.loss = Loss::Compiled;
  return s;
}

// RMSNorm written as ops (norm_kernels.cpp): torchtitan's RMSNorm class, then nn.RMSNorm, ran so in
// eager PyTorch until F.rms_norm got its fused CUDA kernel (pytorch/pytorch#153666, August 2025,
// first released in 2.9; pytorch/pytorch#157345 reports 2.6's nn.RMSNorm slower than LayerNorm).
Stack rms_norm_ops(Stack s) {
  s.norm = NormImpl::Composite;
  return s;
}

// HF's LlamaMLP computes gate and up with two GEMMs (down_proj(act_fn(gate_proj(x)) * up_proj(x))).
Stack separate_swiglu(Stack s) {
  s.swiglu = Swiglu::Separate;
  return s;
}

const std::map<std::string, Stack>& registry() {
  using taskgraph::TpOverlap;
  using strategies::Allocator, strategies::Fp8WeightCopies, strategies::StateBuffers;
  // PyTorch's own optimizers (torchtitan, Composer, a plain training loop) free the gradients
  // between steps: zero_grad(set_to_none=True), the default since PyTorch 2.0.
  constexpr strategies::StackMemory kEager{StateBuffers::Framework, Fp8WeightCopies::None, Allocator::PytorchCaching,
                                           strategies::Loss::Fused, true};
  constexpr strategies::StackMemory kTitan{StateBuffers::Framework, Fp8WeightCopies::None, Allocator::PytorchExpandable,
                                           strategies::Loss::Fused, true};
  constexpr strategies::StackMemory kTe{StateBuffers::Framework, Fp8WeightCopies::CopyAndTranspose, Allocator::PytorchCaching};
  static const std::map<std::string, Stack> stacks{
      {"default", Stack{}},
      // PyTorch's SDPA flash backend is FlashAttention-2, vendored (aten/src/ATen/native/transformers/cuda/flash_attn):
      // its own rates, sdpa-flash (attention_rates.cpp).
      {"pytorch-eager", fsdp2(eager_torchtitan(Stack{"pytorch-eager", AttentionImpl::SdpaFlash, Elementwise::Eager,
                                                     kEagerDispatchS, kDeviceCommSms, TpOverlap::None, kEager}))},
      // torchtitan calls the same SDPA; regional torch.compile fuses the element-wise chains, the
      // loss's cast and RoPE's casts into the kernels beside them: Inductor's RoPE kernels and the
      // split's backward cat are its copies (attention_copies.cpp, compiled_copy_passes).
      {"torchtitan-compile", compiled_loss(fsdp2(compiled_shapes(Stack{"torchtitan-compile", AttentionImpl::SdpaFlash, Elementwise::Compiled,
                                                         kInductorDispatchS, kDeviceCommSms, TpOverlap::None, kTitan})))},
      // The same with --compile.enable_async_tensor_parallel: Inductor's micro-pipeline TP pass.
      {"torchtitan-async-tp", compiled_loss(fsdp2(compiled_shapes(Stack{"torchtitan-async-tp", AttentionImpl::SdpaFlash,
                                                          Elementwise::Compiled, kInductorDispatchS, kDeviceCommSms,
                                                          TpOverlap::AsyncTp, kTitan})))},
      // Megatron-Core with Transformer Engine: fused norms, bias-GELU/SwiGLU and bias-dropout-add
      // (the model's fused kernels); TE's DotProductAttention on Hopper runs cuDNN's fused attention
      // when FlashAttention-3 is not installed (not checked against TE's source in this slice).
      // Copies fused: RoPE is TE's FusedRoPEFunc (transformer_engine/pytorch/attention/rope.py
      // @d0067d0), Megatron-LM's --no-rope-fusion being off by default (training/arguments.py @d98e8a6).
      {"megatron-te", te_bias_grad(megatron_core(megatron_shapes(Stack{"megatron-te", AttentionImpl::Cudnn, Elementwise::Fused,
                                                          kEagerDispatchS, kDeviceCommSms, TpOverlap::None, kTe})))},
      // The same with --tp-comm-overlap (TE userbuffers with initialize_ub's defaults).
      {"megatron-te-tp-overlap",
       te_bias_grad(megatron_core(megatron_shapes(Stack{"megatron-te-tp-overlap", AttentionImpl::Cudnn, Elementwise::Fused, kEagerDispatchS,
                                           kDeviceCommSms, TpOverlap::TransformerEngine, kTe})))},
      // llm-foundry (mosaicml/llm-foundry @8c8dd48) on Composer's FSDP1: MPT's attn_impl "flash"
      // (llmfoundry/models/utils/config_defaults.py: flash_attn's FlashAttention-2), no
      // torch.compile unless compile_config is given (llmfoundry/utils/config_utils.py,
      // compile_config None), PYTORCH_CUDA_ALLOC_CONF expandable_segments:True by default
      // (config_utils.py expandable_segments True; command_utils/train.py sets it). Composer's FSDP
      // knobs are the scenario's parallelism.zero3 (docs/stacks.md).
      // Its Llama-style models are HF's, whose LlamaRMSNorm runs as ops in every version, as does
      // llm-foundry's own RMSNorm (llmfoundry/models/layers/norm.py @03c9784: the same ops, the
      // weight multiplied before the cast back); MPT's LayerNorm is one kernel.
      {"llm-foundry", separate_swiglu(rms_norm_ops(eager_shapes(Stack{"llm-foundry", AttentionImpl::Flash2, Elementwise::Eager, kEagerDispatchS,
                                                      kDeviceCommSms, TpOverlap::None, kTitan})))},
      // pytorch-eager as PyTorch 2.4-2.8 ran it: the same, with RMSNorm as ops (norm_kernels.cpp).
      {"pytorch-eager-2.8", rms_norm_ops(fsdp2(eager_torchtitan(Stack{"pytorch-eager-2.8", AttentionImpl::SdpaFlash, Elementwise::Eager,
                                                                     kEagerDispatchS, kDeviceCommSms, TpOverlap::None, kEager})))},
      {"deepspeed", deepspeed("deepspeed", Zero3Gathers::Coalesced)},
      {"deepspeed-0.5", deepspeed("deepspeed-0.5", Zero3Gathers::PerParameter)},
      {"horovod", horovod("horovod", 128, 1, true)},
      {"horovod-0.16", horovod("horovod-0.16", 64, 5, false)},
      {"jax-xla", jax_xla()},
  };
  return stacks;
}

// FLOPs as FlashAttention's benchmark counts them: the causal mask halves them. Its published
// rate, less what this grid leaves of the SMs idle that the benchmark's did not.
double attention_seconds(const DeviceProfile& d, const models::Kernel& k, const std::string& dtype) {
  const bool backward = k.role == models::KernelRole::FlashBackward;
  const double hd = static_cast<double>(k.k), seq = static_cast<double>(k.n);
  const double published = backward ? flash_backward_tflops(d.stack.attention, hd, k.causal, seq)
                                    : flash_forward_tflops(d.stack.attention, hd, k.causal, seq);
  const double tflops = published * flash_grid_factor(d.stack.attention, k, d.sm_count);
  // The rates are H100 SXM5's (989.4 TFLOP/s dense 16-bit); the A100's own tables say how much
  // slower it runs each shape; elsewhere scaled by the device's peak.
  const auto peak = d.peak_flops.find(dtype);
  const double scale = d.attention_tables == AttentionTables::A100 ? a100_over_h100(d.stack.attention, hd, k.causal, seq)
                       : peak == d.peak_flops.end()                ? 1.0
                                                                   : peak->second / 989.4e12;
  const double flops = k.causal ? k.flops / 2.0 : k.flops;
  // Dropout on the probabilities: a random number per score the kernel computes.
  const double scores = static_cast<double>(k.batch) * static_cast<double>(k.m) * seq * (k.causal ? 0.5 : 1.0);
  const double dropout = k.dropout ? scores * flash_dropout_seconds_per_score(d.stack.attention, backward) / scale : 0.0;
  return std::max(flops / (tflops * 1e12 * scale) + dropout, d.kernel_min_s);
}

// Grouped-query attention's backward in FlashAttention-2: the kernel writes K's and V's gradients
// once per query head, then sums each group's into the KV heads' (csrc/flash_attn/flash_api.cpp
// mha_bwd: dk_expanded, dv_expanded, at::sum_out over the group dimension; PyTorch's vendored copy,
// SDPA's flash backend with enable_gqa, does the same). Two reductions, each reading a query-sized
// tensor (e per element of Q) and writing a KV-sized one, over a strided group dimension: priced at
// the device's unvectorised rate per element read (MemoryPass::unvectorised_elems).
std::vector<MemoryPass> gqa_sum_passes(AttentionImpl impl, const models::Kernel& k) {
  if (!flash_attention_2(impl) || k.role != models::KernelRole::FlashBackward || k.io.kv <= 0 || k.io.q <= k.io.kv) return {};
  const MemoryPass sum{k.elem_bytes * (k.io.q + k.io.kv), false, k.io.q};
  return {sum, sum};
}

}  // namespace

const char* to_string(AttentionImpl a) {
  switch (a) {
    case AttentionImpl::GemmCurve: return "gemm-curve";
    case AttentionImpl::Flash2: return "flash2";
    case AttentionImpl::Flash3: return "flash3";
    case AttentionImpl::Cudnn: return "cudnn";
    case AttentionImpl::SdpaMath: return "sdpa-math";
    case AttentionImpl::SdpaFlash: return "sdpa-flash";
  }
  return "?";
}

const char* to_string(Elementwise e) {
  return e == Elementwise::Eager ? "eager" : e == Elementwise::Compiled ? "compiled" : "fused";
}

std::optional<AttentionImpl> attention_impl_from_string(const std::string& s) {
  for (auto a : {AttentionImpl::GemmCurve, AttentionImpl::Flash2, AttentionImpl::Flash3, AttentionImpl::Cudnn,
                 AttentionImpl::SdpaMath, AttentionImpl::SdpaFlash})
    if (s == to_string(a)) return a;
  return std::nullopt;
}

std::optional<Elementwise> elementwise_from_string(const std::string& s) {
  for (auto e : {Elementwise::Fused, Elementwise::Eager, Elementwise::Compiled})
    if (s == to_string(e)) return e;
  return std::nullopt;
}

const char* to_string(taskgraph::TpOverlap t) {
  switch (t) {
    case taskgraph::TpOverlap::None: return "none";
    case taskgraph::TpOverlap::TransformerEngine: return "te-userbuffers";
    case taskgraph::TpOverlap::AsyncTp: return "async-tp";
  }
  return "?";
}

std::optional<taskgraph::TpOverlap> tp_overlap_from_string(const std::string& s) {
  for (auto t : {taskgraph::TpOverlap::None, taskgraph::TpOverlap::TransformerEngine, taskgraph::TpOverlap::AsyncTp})
    if (s == to_string(t)) return t;
  return std::nullopt;
}


const char* to_string(Copies c) { return c == Copies::Eager ? "eager" : c == Copies::RotateHalf ? "eager-rotate-half" : "fused"; }

const char* to_string(GatherCopies g) { return g == GatherCopies::CopyOut ? "copy-out" : "none"; }

const char* to_string(GemmShapes g) {
  return g == GemmShapes::AsWritten ? "as-written" : g == GemmShapes::Padded ? "padded" : "curve";
}

std::optional<GemmShapes> gemm_shapes_from_string(const std::string& s) {
  for (auto g : {GemmShapes::Curve, GemmShapes::AsWritten, GemmShapes::Padded})
    if (s == to_string(g)) return g;
  return std::nullopt;
}

const char* to_string(NormImpl n) { return n == NormImpl::Composite ? "composite" : "fused"; }
const char* to_string(Swiglu s) { return s == Swiglu::Separate ? "separate" : "chunked"; }

const char* to_string(Zero3Gathers z) { return z == Zero3Gathers::PerParameter ? "per-parameter" : "coalesced"; }

std::vector<std::string> stack_names() {
  std::vector<std::string> out;
  for (const auto& [name, _] : registry()) out.push_back(name);
  return out;
}

std::optional<Stack> find_stack(const std::string& name) {
  auto it = registry().find(name);
  if (it == registry().end()) return std::nullopt;
  return it->second;
}

namespace {
// One memory-bound kernel: the device's memory-bound curve, at least kernel_min, and no faster than
// the device's cast-up rate where the pass widens its type.
double memory_pass_seconds(const DeviceProfile& d, const MemoryPass& p, const std::string& dtype) {
  models::Kernel pass{"elementwise_pass", models::KernelKind::Memory, 1, 0, 0, 0, 0, p.bytes};
  if (p.cast_up) pass.role = models::KernelRole::CastUp;
  const double t = kernel_time(d, pass, dtype);
  if (p.unvectorised_elems <= 0 || d.cast_up_bandwidth <= 0) return t;
  constexpr double kCastUpBytesPerElem = 6;  // reads 2, writes 4
  return std::max(t, p.unvectorised_elems * kCastUpBytesPerElem / d.cast_up_bandwidth);
}

// Inductor's kernels around attention (attention_copies.cpp): a compiled stack on a GPU (XLA on a
// TPU fuses otherwise) whose copies are its own.
std::vector<MemoryPass> inductor_copy_passes(const DeviceProfile& d, const models::Kernel& k) {
  if (d.stack.elementwise != Elementwise::Compiled || d.stack.copies != Copies::Fused || d.sm_count <= 0) return {};
  return compiled_copy_passes(k);
}

// A norm run as one kernel each way at its measured rate (fused_norm_rates.cpp): ATen's under an
// eager stack (an RMSNorm written as ops is eager_op_passes', asked first), Inductor's under a
// compiled one.
std::vector<double> fused_norm_kernels(const DeviceProfile& d, const models::Kernel& k, const std::string& dtype) {
  if (d.stack.elementwise == Elementwise::Compiled) return compiled_norm_seconds(d, k, dtype);
  if (d.stack.elementwise == Elementwise::Eager) return fused_norm_seconds(d, k, dtype);
  return {};
}

// What an eager stack runs as PyTorch ops in place of a model's RMSNorm or SwiGLU kernel
// (norm_kernels.cpp, swiglu_kernels.cpp); compiled and fused stacks keep the model's kernel.
std::vector<MemoryPass> eager_op_passes(const Stack& s, const models::Kernel& k) {
  if (s.elementwise != Elementwise::Eager) return {};
  auto passes = norm_passes(s.norm, k);
  return passes.empty() ? swiglu_passes(s.swiglu, k) : passes;
}
}  // namespace

// Every kernel the stack launches for `k`: its GPU time, at least the host's dispatch time.
KernelPrice quote_stacked(const DeviceProfile& d, const models::Kernel& k, const std::string& dtype) {
  const double overhead = launch_overhead(d, dtype);
  std::vector<double> gpu;
  KernelPrice base;
  const bool attention = k.role == models::KernelRole::FlashForward || k.role == models::KernelRole::FlashBackward;
  if (attention && d.stack.attention != AttentionImpl::GemmCurve) {
    gpu.push_back(attention_seconds(d, k, dtype));
    for (const auto& pass : gqa_sum_passes(d.stack.attention, k)) gpu.push_back(memory_pass_seconds(d, pass, dtype));
  } else if (auto loss = loss_passes(d.stack.memory.loss, k); !loss.empty()) {
    for (const auto& pass : loss) gpu.push_back(memory_pass_seconds(d, pass, dtype));
  } else if (auto norm = batch_norm_seconds(d, d.stack.elementwise, k); !norm.empty()) {
    gpu.insert(gpu.end(), norm.begin(), norm.end());
  } else if (auto ops = eager_op_passes(d.stack, k); !ops.empty()) {
    for (const auto& pass : ops) gpu.push_back(memory_pass_seconds(d, pass, dtype));
  } else if (auto fused = fused_norm_kernels(d, k, dtype); !fused.empty()) {
    gpu.insert(gpu.end(), fused.begin(), fused.end());
  } else {
    const auto plan = element_plan(d.stack.elementwise, k, d.stack.bias_grad_in_gemm);
    if (plan.keep) {
      base = quote_gemm(d, k, dtype);
      gpu.push_back(base.seconds - overhead);
    }
    for (double bytes : plan.passes) gpu.push_back(memory_pass_seconds(d, MemoryPass{bytes}, dtype));
  }
  for (const auto& pass : copy_passes(d.stack.copies, k)) gpu.push_back(memory_pass_seconds(d, pass, dtype));
  for (const auto& pass : inductor_copy_passes(d, k)) gpu.push_back(memory_pass_seconds(d, pass, dtype));
  double seconds = 0;
  for (double t : gpu) seconds += std::max(t, d.stack.dispatch_s) + overhead;
  return {seconds, base.source, base.spread};
}

}  // namespace dtsim::cost
