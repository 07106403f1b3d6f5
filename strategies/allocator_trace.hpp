#pragma once
// The tensors one pipeline stage allocates and frees over a training step, replayed through the
// caching allocator (strategies/caching_allocator.hpp) to find what it reserves beyond what the
// tensors hold at their peak. A fixed-shape step repeats the same requests, so the cache the
// first step builds serves the second; what is left over is fragmentation: blocks split for a
// smaller request that a larger one cannot use, and segments of the loss's logits that the rest
// of the step cannot fill.
//
// The trace, per micro-batch and layer, op by op (models::Op):
// - forward: each op's output (its largest forward kernel's result); what the op keeps for
//   backward stays, the rest is freed once the next op has read it; a checkpointed block keeps
//   only its input;
// - backward, ops in reverse: the gradient of each op's input, the previous one freed, then the
//   op's kept tensors; a checkpointed block first re-runs its forward;
// - under ZeRO-3 each layer's gathered weights around both passes, and its unsharded gradients
//   until they are reduce-scattered;
// - micro-batches in a 1F1B order with `in_flight` forwards ahead, twice as many as are in
//   flight, and the whole step twice.
#include <vector>

#include "strategies/recompute.hpp"

namespace dtsim::strategies {

struct TraceOptions {
  int in_flight = 1;               // micro-batches whose activations a stage holds at once
  double gathered_bytes_per_param = 0;  // ZeRO-3's gathered weights (0: none gathered)
  double grad_bytes_per_param = 0;      // ... and its unsharded gradients before reduce-scatter
  int activation_bytes = 2;
};

// Reserved peak less allocated peak, in bytes, for `layers` (one stage, in model order) each
// recomputed as `checkpoints` says.
double caching_slack(const Layers& layers, const Checkpoints& checkpoints, const TraceOptions& o);

// Everything caching_slack() reads of `layers`, `checkpoints` and `o`, as numbers: two stages with
// the same signature have the same slack (a plan's middle stages, replayed once).
std::vector<double> trace_signature(const Layers& layers, const Checkpoints& checkpoints, const TraceOptions& o);

// At most this many micro-batches in flight are replayed. What the cache keeps comes from the
// pattern of transient tensors, which repeats from the second micro-batch on; more in flight add
// live blocks, not new holes (GPT-3 175B, TP 4 x PP 16 stages: 0.28-0.34 GiB for 2 to 64 in
// flight), and each one costs a replay of the stage.
inline constexpr int kTraceMostInFlight = 4;

}  // namespace dtsim::strategies
