#include "sim/cost/stack_memory.hpp"

namespace dtsim::cost {

using strategies::Allocator;
using strategies::Fp8WeightCopies;
using strategies::StateBuffers;

strategies::StackMemory stack_memory(const std::string& preset) {
  // PyTorch runs on its caching allocator unless PYTORCH_ALLOC_CONF says otherwise; torchtitan's
  // run_train.sh (pytorch/torchtitan @0168bd5) sets PYTORCH_ALLOC_CONF="expandable_segments:True".
  // torchtitan's Float8 (torchao Float8Linear) casts each weight per use, FP8-all-gathered under
  // FSDP2 (torchao float8/fsdp_utils.py, fsdp_pre_all_gather casts the shard), and keeps no FP8
  // copy between micro-batches; Transformer Engine caches the FP8 weight and its transpose on the
  // module (te/pytorch/module/linear.py, get_weight_workspace with cache_name "weight").
  if (preset == "pytorch-eager") return {StateBuffers::Framework, Fp8WeightCopies::None, Allocator::PytorchCaching};
  if (preset == "torchtitan-compile" || preset == "torchtitan-async-tp") return {StateBuffers::Framework, Fp8WeightCopies::None, Allocator::PytorchExpandable};
  if (preset == "megatron-te" || preset == "megatron-te-tp-overlap")
    return {StateBuffers::Framework, Fp8WeightCopies::CopyAndTranspose, Allocator::PytorchCaching};
  return {};
}

}  // namespace dtsim::cost
