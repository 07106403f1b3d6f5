#include "strategies/memory.hpp"

#include <algorithm>

#include "strategies/recompute.hpp"

namespace dtsim::strategies {

double kept_activations(const std::vector<const models::Layer*>& layers, Recompute r) {
  ParallelismSpec p;
  p.recompute = r;
  return Checkpoints(p, {layers}, 1).kept(layers);
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
