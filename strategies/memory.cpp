#include "strategies/memory.hpp"

#include <algorithm>

namespace dtsim::strategies {

double weight_bytes_per_param(Precision p) { return mixed_precision(p) ? 2.0 : 4.0; }
double grad_bytes_per_param(Precision p) { return mixed_precision(p) ? 2.0 : 4.0; }
double optimizer_bytes_per_param(Precision p, models::OptimizerKind o) {
  double states = o == models::OptimizerKind::Adam ? 8.0 : 4.0;  // (m, v) or momentum, fp32
  return states + (mixed_precision(p) ? 4.0 : 0.0);               // fp32 master weights
}

double InputPipeline::seconds(std::int64_t micro_batch) const {
  if (!enabled) return 0;
  const double b = static_cast<double>(micro_batch);
  const double cpu = b * cpu_seconds_per_sample / std::max(1, workers_per_gpu);
  const double io = storage_bandwidth_per_gpu > 0 ? b * sample_bytes / storage_bandwidth_per_gpu : 0.0;
  return std::max(cpu, io);
}

const char* to_string(Recompute r) {
  switch (r) {
    case Recompute::None: return "none";
    case Recompute::Selective: return "selective";
    case Recompute::Full: return "full";
  }
  return "?";
}

double activation_bytes_per_micro_batch(const models::ModelGraph& g, Recompute r) {
  double total = 0, largest_block = 0;
  for (const auto& layer : g.layers) {
    bool block = layer.kind == models::LayerKind::Block;
    if (block && r == Recompute::Full) {
      total += layer.input_bytes;
      largest_block = std::max(largest_block, layer.saved_bytes());
      continue;
    }
    for (const auto& op : layer.ops)
      total += (block && r == Recompute::Selective) ? op.saved_bytes_selective : op.saved_bytes;
  }
  // Under full recomputation one block at a time is rebuilt in full during backward.
  return total + largest_block;
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
