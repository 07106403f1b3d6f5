#pragma once
#include <vector>

#include "models/model_graph.hpp"
#include "strategies/spec.hpp"

namespace dtsim::strategies {

// Per-GPU memory of one rank, in bytes.
struct MemoryBreakdown {
  double params = 0, gradients = 0, optimizer = 0, activations = 0, other = 0;
  double peak() const { return params + gradients + optimizer + activations + other; }
};

// Activation bytes a micro-batch leaves behind after its forward through `layers`, every block
// recomputed as `r` (full recomputation keeps only each block's input; stage recomputation only
// the first block's, `layers` being one pipeline chunk). A layout's own: Checkpoints::kept.
double kept_activations(const std::vector<const models::Layer*>& layers, Recompute r);

// Model states for `params` parameters, sharded over `dp` ranks by ZeRO stage (Rajbhandari et al.
// 2020, Sec. 5: stage 1 shards optimizer state, 2 adds gradients, 3 adds parameters).
MemoryBreakdown model_state_memory(double params, Precision p, models::OptimizerKind o, int zero_stage, int dp);

}  // namespace dtsim::strategies
