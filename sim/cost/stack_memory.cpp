#include "sim/cost/stack_memory.hpp"

namespace dtsim::cost {

using strategies::Allocator;
using strategies::Fp8WeightCopies;
using strategies::StateBuffers;

strategies::StackMemory stack_memory(const std::string& preset) {
  // PyTorch runs on its caching allocator unless PYTORCH_ALLOC_CONF says otherwise; torchtitan's
  // run_train.sh (pytorch/torchtitan @0168bd5) sets PYTORCH_ALLOC_CONF="expandable_segments:True".
  // torchtitan's Float8 (torchao Float8Linear) casts each weight per use, FP8-all-gathered under
  // FSDP2, and keeps no FP8 copy between micro-batches; Transformer Engine keeps the FP8 weight
  // and its transpose (the default's behaviour).
  if (preset == "pytorch-eager") return {StateBuffers::Framework, Fp8WeightCopies::None, Allocator::PytorchCaching};
  if (preset == "torchtitan-compile") return {StateBuffers::Framework, Fp8WeightCopies::None, Allocator::PytorchExpandable};
  if (preset == "megatron-te")
    return {StateBuffers::Framework, Fp8WeightCopies::CopyAndTranspose, Allocator::PytorchCaching};
  return {};
}

}  // namespace dtsim::cost
