#include "strategies/stack_memory.hpp"

namespace dtsim::strategies {

namespace {

// Bytes per parameter before sharding, and from which ZeRO stage each part is sharded.
struct PerParam {
  double weights, grads, optimizer;
  int weights_from = 3, grads_from = 2, optimizer_from = 1;
};

// Mixed precision (bf16, fp16; fp8 keeps bf16 weights) as each framework allocates it; `states`
// is the optimizer's own fp32 state (Adam m and v: 8, momentum: 4).
//
// Megatron-Core (NVIDIA/Megatron-LM @d98e8a6): bf16 forces fp32 main gradients
// (megatron/training/arguments.py: accumulate_allreduce_grads_in_fp32 = True "for bfloat16 data
// type"); the grad buffer is fp32 when grad_reduce_in_fp32 (core/distributed/
// param_and_grad_buffer.py, group_params_for_buffers); the optimizer keeps fp32 main params and
// its states, sharded by the distributed optimizer (core/optimizer/distrib_optimizer.py). With
// fp16 gradients stay fp16 and the optimizer adds an fp32 copy of them. Megatron's own table
// (docs/user-guide/features/dist_optimizer.md): bf16 18 or 6 + 12/d, fp16 20 or 4 + 16/d.
//
// DeepSpeed (microsoft/DeepSpeed @38327e0): with bf16 and no ZeRO, runtime/engine.py
// (get_data_types, _do_optimizer_sanity_check) accumulates gradients in fp32 and wraps the
// optimizer in BF16_Optimizer (runtime/bf16_optimizer.py), which keeps the bf16 weights, an fp32
// gradient buffer of the whole model (fp32_groups_gradients_flat, zeros_like the flat bf16
// weights) and shards fp32 master weights and optimizer state over the data-parallel ranks.
// With ZeRO 1-3 the gradients stay in the weights' dtype (runtime/zero/stage_1_and_2.py: .grad,
// or grads_in_partition under stage 2; stage3.py: grad_partitions_flat_buffer in the
// gradient_accumulation_dtype, the weights' by default), fp32 master weights
// (single_partition_of_fp32_groups) and state sharded: the ZeRO paper's 2 + 2 + 12.
//
// PyTorch FSDP (FSDP1 MixedPrecision, FSDP2 MixedPrecisionPolicy; pytorch/pytorch @010ae4a,
// torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py, foreach_reduce): the sharded
// parameter is the fp32 original (no separate master copy), reduced gradients are cast back to
// it (_to_dtype_if_needed(reduce_output, orig_dtype)) and kept sharded in fp32; the optimizer
// steps the fp32 shards. The bf16 unsharded weights and gradients live only while a unit runs.
// --grad-reduce-in-bf16 keeps the bf16 gradient buffer (grad_buffer_bytes 2; the optimizer casts
// its shard to fp32 as it steps, not held here).
PerParam mixed(Framework f, Precision p, double states, int zero_stage, int grad_buffer_bytes) {
  const bool fp16 = p == Precision::Fp16;
  switch (f) {
    case Framework::MegatronLM:
      if (fp16) return PerParam{2, 2, states + 8};
      return PerParam{2, grad_buffer_bytes > 0 ? grad_buffer_bytes + 0.0 : 4.0, states + 4};
    case Framework::DeepSpeed:
      // BF16_Optimizer shards its master weights and state even without ZeRO.
      if (!fp16 && zero_stage == 0) return PerParam{2, 4, states + 4, 3, 4, 0};
      return PerParam{2, 2, states + 4};
    case Framework::Fsdp:
      return PerParam{4, 4, states, 1, 1, 1};
  }
  return PerParam{2, 2, states + 4};
}

}  // namespace

const char* to_string(StateBuffers b) { return b == StateBuffers::Framework ? "framework" : "zero-paper"; }
const char* to_string(Fp8WeightCopies c) {
  return c == Fp8WeightCopies::None ? "none" : c == Fp8WeightCopies::Fp8Params ? "fp8-params" : "copy-and-transpose";
}
const char* to_string(Allocator a) {
  return a == Allocator::PytorchCaching ? "pytorch-caching" : a == Allocator::PytorchExpandable ? "pytorch-expandable" : "none";
}

const char* to_string(Loss l) {
  return l == Loss::EagerFp32 ? "eager-fp32" : l == Loss::Compiled ? "compiled" : "fused";
}

// Per logit, `e` its element size:
// - fused: Megatron-LM's vocab_parallel_cross_entropy keeps the fp32 softmax (Korthikanti et al.'s
//   4sbv, the model graph's saved bytes) and its backward writes the gradient into it in place
//   (core/tensor_parallel/cross_entropy.py, _VocabParallelCrossEntropy.backward): nothing more.
// - eager-fp32: F.cross_entropy(pred.float(), labels) (torchtitan/components/loss.py) keeps
//   log_softmax's fp32 output; backward, nll_loss_backward zero-fills an fp32 gradient and
//   log_softmax_backward_data writes another beside the kept output (aten LossNLL.cpp,
//   SoftMax.cpp) before the cast's backward frees them: 8 bytes at once.
// - compiled: torchtitan compiles the loss with the model (config Compile.components defaults
//   to ["model", "loss"]); AOTAutograd's min-cut partitioner keeps the 16-bit logits, the
//   cheapest tensor the softmax can be recomputed from (and a logsumexp per token, not counted),
//   and Inductor's one backward kernel writes the logits' gradient in their dtype. The compiled
//   H100 steps' profiles show the two reductions (docs/gpu_check.md).
double loss_kept_bytes(Loss l, double e) { return l == Loss::Compiled ? e : 4.0; }
double loss_backward_bytes(Loss l, double e) {
  return l == Loss::EagerFp32 ? 8.0 : l == Loss::Compiled ? e : 0.0;
}

MemoryBreakdown stack_state_memory(double params, Precision p, models::OptimizerKind o, int zero_stage, int dp,
                                   Framework f, StateBuffers b, int grad_buffer_bytes) {
  // Full precision keeps no master copy in any of the three: the ZeRO paper's 4 + 4 + states.
  if (b == StateBuffers::ZeroPaper || !mixed_precision(p)) return model_state_memory(params, p, o, zero_stage, dp);
  const double states = optimizer_bytes_per_param(p, o) - 4.0;  // less the fp32 master copy
  const PerParam pp = mixed(f, p, states, zero_stage, grad_buffer_bytes);
  const double n = static_cast<double>(dp);
  auto part = [&](double bytes, int from) { return params * bytes / (zero_stage >= from ? n : 1.0); };
  MemoryBreakdown m;
  m.params = part(pp.weights, pp.weights_from);
  m.gradients = part(pp.grads, pp.grads_from);
  m.optimizer = part(pp.optimizer, pp.optimizer_from);
  return m;
}

double state_bucket_bytes(Precision p, int zero_stage, const FrameworkSpec& f, StateBuffers b) {
  if (b == StateBuffers::ZeroPaper || f.framework != Framework::DeepSpeed || zero_stage < 2) return 0;
  // The contiguous reduce bucket (ipg buffer) of reduce_bucket_size elements in the weights'
  // dtype: one under ZeRO-3 (stage3.py, __ipg_bucket_flat_buffer); under ZeRO-2 one, two with
  // overlap_comm, which defaults to off below stage 3 (zero/config.py, overlap_comm_valid).
  return f.reduce_bucket_params * weight_bytes_per_param(p);
}

// fp8-params: the FP8 weight (1 byte) and its transpose (1) take the place of the bf16 weight (2).
double fp8_copy_bytes_per_param(Fp8WeightCopies c) { return c == Fp8WeightCopies::CopyAndTranspose ? 2.0 : 0.0; }

}  // namespace dtsim::strategies

namespace dtsim::strategies {

// What the caching allocator holds beyond the allocated peak is replayed, not a ratio: its rules
// (strategies/caching_allocator.hpp) over the stage's tensors (strategies/allocator_trace.hpp).
// Before, a ratio of 1.845 x the transient bytes came from cosmos-rl PR #388 (allocator.json
// alloc-001..004), a workload whose shapes vary from step to step; fixed-shape steps reserve far
// less (docs/gpu_check.md: 0.4-3.4 GiB on 11-45 GiB allocated).
// Expandable segments map pages into one growing segment per pool and leave no holes between
// blocks: at most one partly used page per pool, a 20 MiB large-pool page and a 2 MiB small-pool
// page.
constexpr double kExpandablePagesBytes = 20.0 * 1024 * 1024 + 2.0 * 1024 * 1024;

double allocator_slack(Allocator a, const Layers& layers, const Checkpoints& c, const TraceOptions& o) {
  switch (a) {
    case Allocator::None: return 0;
    case Allocator::PytorchCaching: return caching_slack(layers, c, o);
    case Allocator::PytorchExpandable: return kExpandablePagesBytes;
  }
  return 0;
}

}  // namespace dtsim::strategies
