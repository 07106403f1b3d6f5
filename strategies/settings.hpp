#pragma once
// Names of a spec's settings, and what follows from them, as results report them.
#include "strategies/spec.hpp"

namespace dtsim::strategies {

const char* to_string(Precision p);
const char* to_string(Compression c);
const char* to_string(models::Fp8Scaling s);
// The precision as a summary states it: FP8 with its scaling recipe.
std::string precision_text(const TrainingSpec& t);

// Bytes per gradient the data-parallel sync reduces: the gradient's own, but DeepSpeed's pipeline
// engine reduces the BF16 optimizer's fp32 gradients after the flush (pipe/engine.py).
bool pipeline_reduce_after_flush(const ParallelismSpec& p);
double reduced_grad_bytes(const ParallelismSpec& p, Precision t);
// Bytes per gradient the data-parallel buckets carry when reduced as backward runs: the
// framework's gradient buffer's (FrameworkSpec::grad_buffer_bytes) under ZeRO 0-1, else the
// gradient's own.
double wire_grad_bytes(const ParallelismSpec& p, Precision t);
// The framework's gradient buffer under ZeRO stage `zero_stage`, bytes per element; 0 where none
// is held (none configured, or ZeRO-2/3, which reduce per layer).
int held_grad_buffer_bytes(const FrameworkSpec& f, int zero_stage);

// Why DDP's bucket priority order (ByteScheduler's, bucket_order "priority") is not modelled for
// `p`, nullptr where it is: synchronous data parallelism over 2 or more ranks without tensor,
// pipeline or ZeRO, gradients reduced during backward, the optimizer on the GPU. The scenario
// loader refuses the rest with this reason; the sweep drops the order from such candidates.
const char* priority_order_refusal(const ParallelismSpec& p);

// The bubble's share of the step in the uniform case, bubble / (ideal compute + bubble): what
// Narayanan et al. 2021 and the lectures quote, (p-1)/(m+p-1) for GPipe and 1F1B, (p-1)/p for
// the naive split, (p-1)/(v m + p-1) interleaved. (bubble_fraction is over ideal compute.)
double bubble_share(Schedule s, int stages, int micro_batches, int chunks);

}  // namespace dtsim::strategies
