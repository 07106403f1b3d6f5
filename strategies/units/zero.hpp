#pragma once
// ZeRO as Megatron-LM and dtsim's idealised planner run it (Rajbhandari et al. 2020): stage 1
// shards the optimizer state (gradients reduce-scattered, updated parameters all-gathered after
// the step), stage 2 the gradients too (every micro-batch but the last reduce-scatters its
// gradients), stage 3 the parameters (each layer gathered before its forward and backward, its
// gradients reduce-scattered right after its backward). A framework's own ZeRO-3 (DeepSpeed,
// FSDP) is strategies/units/framework_zero3.cpp. The unit itself is registered in
// strategies/unit.cpp; this header holds its closed-form terms.
#include <cstdint>
#include <vector>

namespace dtsim::strategies {

// The closed form's terms (sim/results/closed_form.cpp prices the collectives and passes):
// ZeRO-1's parameter all-gather follows the optimizer step of the 1/D shard.
double zero1_stage_end(double step_start, double optimizer_seconds, double gather_seconds);
// Megatron-Core's overlapped gather on one stage: layer i's gather gather[i] (0 for a layer
// without parameters) queued from the step's start, its first forward forward[i] waiting for it.
// How much later the first forward ends than without gathers: max over i of (gathers through i
// - forwards before i), at least 0.
double overlapped_gather_delay(const std::vector<double>& gather, const std::vector<double>& forward);

// ZeRO-3 on one stage: per layer i its gather ag[i], reduce-scatter rs[i], forward fwd[i] and
// backward bwd[i]. The gathers of a forward run ahead on the communication stream; a backward's
// gather waits for the previous layer's reduce-scatter; every micro-batch alike; then the step.
struct Zero3Prices {
  std::vector<double> gather, reduce, forward, backward;
  std::int64_t micro_batches = 1;
  double optimizer = 0;
};
double zero3_step_seconds(const Zero3Prices& z);

}  // namespace dtsim::strategies
