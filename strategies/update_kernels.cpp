#include "strategies/update_kernels.hpp"

#include "strategies/settings.hpp"
#include "strategies/units/units.hpp"

namespace dtsim::strategies {

// A bf16 (or FP8, bf16-weighted) update steps fp32 masters, so it needs fp32 gradients. Where the
// framework holds the gradients in 16 bits, the step casts its shard up first, one copy into a
// new fp32 tensor:
// - Megatron-LM with --grad-reduce-in-bf16 (a 2-byte gradient buffer): the distributed
//   optimizer's _copy_model_grads_to_main_grads sets shard_main_param.grad =
//   shard_model_grad.float() (megatron/core/optimizer/distrib_optimizer.py; optimizer.py's
//   Float16OptimizerWithFloat16Params does the same without sharding). With the default fp32
//   buffer .float() returns the buffer itself: no copy.
// - DeepSpeed ZeRO 1-3 under bf16: the gradients stay in the weights' dtype and the step takes
//   single_grad_partition = flatten(averaged_gradients).to(fp32 partition's dtype)
//   (runtime/zero/stage_1_and_2.py step; stage3.py likewise per sub-group). BF16_Optimizer (bf16
//   without ZeRO) accumulates in fp32 as it goes (units/bf16_optimizer.cpp): nothing to cast here.
// - fp16 paths price their cast in the update itself (models::UpdatePath::Fp16Master); FSDP's
//   reduce-scatter casts into fp32 before it reduces (framework_zero3.cpp), so its shards are fp32.
// ATen's cast up runs on its unvectorised path (sim/cost/roofline.cpp prices KernelRole::CastUp at
// the device's cast_up_bandwidth).
bool update_casts_gradients(const ParallelismSpec& p, Precision t) {
  if (update_path(t) != models::UpdatePath::Bf16Master || p.offload_optimizer) return false;
  switch (p.framework.framework) {
    case Framework::MegatronLM: return held_grad_buffer_bytes(p.framework, p.zero_stage) == 2;
    case Framework::DeepSpeed: return p.zero_stage >= 1 && !bf16_optimizer(p, t);
    case Framework::Fsdp: return false;
  }
  return false;
}

models::Kernel grad_cast_kernel(const char* name, double elems) {
  constexpr double kCastBytes = 6;  // reads 2, writes 4
  models::Kernel cast;
  cast.name = name;
  cast.kind = models::KernelKind::Memory;
  cast.bytes = kCastBytes * elems;
  cast.elems = elems;
  cast.elem_bytes = 2;  // read as bf16
  cast.role = models::KernelRole::CastUp;
  return cast;
}

std::vector<models::Kernel> update_kernels(const ParallelismSpec& p, const TrainingSpec& t, double params) {
  std::vector<models::Kernel> out;
  if (update_casts_gradients(p, t.precision) && params > 0) out.push_back(grad_cast_kernel("gradients to fp32", params));
  out.push_back(models::optimizer_kernel(t.optimizer, params, update_path(t.precision)));
  return out;
}

}  // namespace dtsim::strategies
