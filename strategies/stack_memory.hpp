#pragma once
// Memory as the software stack keeps it (issue 30, item 3): the bytes per parameter each
// framework's optimizer keeps, read from its source (table in stack_memory.cpp and
// docs/memory.md), and whether Transformer Engine-style FP8 weight copies stay resident. The
// defaults are dtsim's behaviour before stacks: the ZeRO paper's 2 + 2 + 12 bytes for every
// framework and an FP8 copy with its transpose.
#include "strategies/allocator_trace.hpp"
#include "strategies/framework.hpp"
#include "strategies/memory.hpp"
#include "strategies/spec.hpp"
#include "strategies/stack_memory_kinds.hpp"

namespace dtsim::strategies {

// Weights, gradients and optimizer state of `params` parameters on one GPU, `dp` ranks sharing
// them under ZeRO stage `zero_stage`. With StateBuffers::ZeroPaper this is model_state_memory().
// `grad_buffer_bytes`: held_grad_buffer_bytes() (Megatron's gradient buffer; 0: its default).
MemoryBreakdown stack_state_memory(double params, Precision p, models::OptimizerKind o, int zero_stage, int dp,
                                   Framework f, StateBuffers b, int grad_buffer_bytes = 0);

// Buffers a GPU keeps once whatever its parameter count: DeepSpeed's gradient reduce buckets
// (ZeRO-2/3), 0 otherwise.
double state_bucket_bytes(Precision p, int zero_stage, const FrameworkSpec& f, StateBuffers b);

// FP8 weight bytes resident per FP8 weight element beside the weight itself: 2 (copy and
// transpose) or 0.
double fp8_copy_bytes_per_param(Fp8WeightCopies c);

// Bytes per logit the loss keeps from its forward to its backward, and what its backward holds
// at once beyond them, `e` the logits' element size.
double loss_kept_bytes(Loss l, double e);
double loss_backward_bytes(Loss l, double e);

// Bytes the allocator holds in its cache beyond the allocated peak of a stage of `layers`: the
// caching allocator's replayed over the stage's tensors (strategies/allocator_trace.hpp),
// expandable segments' partly used pages, 0 for none.
double allocator_slack(Allocator a, const Layers& layers, const Checkpoints& c, const TraceOptions& o);

}  // namespace dtsim::strategies
