#include "strategies/memory.hpp"

#include <algorithm>

namespace dtsim::strategies {

double kept_activations(const std::vector<const models::Layer*>& layers, Recompute r) {
  double b = 0;
  bool first_block = true;
  for (const auto* l : layers) {
    const bool block = l->kind == models::LayerKind::Block;
    if (block && (r == Recompute::Full || (r == Recompute::Stage && first_block))) {
      b += l->input_bytes;
      first_block = false;
      continue;
    }
    if (block && r == Recompute::Stage) continue;
    for (const auto& op : l->ops) b += (block && r == Recompute::Selective) ? op.saved_bytes_selective : op.saved_bytes;
  }
  return b;
}

MemoryBreakdown model_state_memory(double params, Precision p, models::OptimizerKind o, int zero_stage, int dp) {
  MemoryBreakdown m;
  double n = static_cast<double>(dp);
  m.params = params * weight_bytes_per_param(p) / (zero_stage >= 3 ? n : 1.0);
  m.gradients = params * grad_bytes_per_param(p) / (zero_stage >= 2 ? n : 1.0);
  m.optimizer = params * optimizer_bytes_per_param(p, o) / (zero_stage >= 1 ? n : 1.0);
  return m;
}

}  // namespace dtsim::strategies
