#pragma once
// What a software stack keeps in GPU memory (issue 30, item 3), as TrainingSpec carries it; the
// mechanisms are in stack_memory.cpp, the presets with the other stack settings in sim/cost/stack.cpp.

namespace dtsim::strategies {

// zero-paper: Rajbhandari et al. 2020, Sec. 3.1 for every framework. framework: what the
// scenario's framework allocates (Megatron-Core, DeepSpeed, PyTorch FSDP), from its source.
enum class StateBuffers { ZeroPaper, Framework };
// copy-and-transpose: Transformer Engine keeps each FP8 weight and its transpose between
// micro-batches. none: the FP8 weight is cast (or FP8-all-gathered under FSDP2) per use and
// freed with the layer (torchao Float8Linear, torchtitan). fp8-params: the weights themselves are
// FP8 with their transpose, no bf16 copy, and the distributed optimizer gathers them in FP8
// (Megatron-LM --fp8-param-gather: Transformer Engine's fp8_model_init).
enum class Fp8WeightCopies { CopyAndTranspose, None, Fp8Params };
// The GPU memory allocator the step runs under: none (dtsim reports allocated bytes only),
// PyTorch's caching allocator, or the same with expandable_segments:True.
enum class Allocator { None, PytorchCaching, PytorchExpandable };
// The loss over the logits as the stack runs it (its kernels: sim/cost/loss_kernels.cpp): fused,
// the model's own (Megatron's fp32 softmax kept, its gradient written in place); eager-fp32,
// F.cross_entropy(logits.float()); compiled, the same under torch.compile's Inductor.
enum class Loss { Fused, EagerFp32, Compiled };

struct StackMemory {
  StateBuffers buffers = StateBuffers::ZeroPaper;
  Fp8WeightCopies fp8_weight_copies = Fp8WeightCopies::CopyAndTranspose;
  Allocator allocator = Allocator::None;
  // The loss's tensors (stack_memory.cpp, loss_kept_bytes): the stack's `loss`.
  Loss loss = Loss::Fused;
  // optimizer.zero_grad(set_to_none=True), PyTorch's default since 2.0: the gradients are freed
  // after each update and allocated again by the next backward, so a step of one micro-batch
  // reaches its activation peak before any exists (Planner::at_peak).
  bool gradients_set_to_none = false;
  bool operator==(const StackMemory&) const = default;
};

const char* to_string(StateBuffers b);
const char* to_string(Fp8WeightCopies c);
const char* to_string(Allocator a);
const char* to_string(Loss l);

}  // namespace dtsim::strategies
