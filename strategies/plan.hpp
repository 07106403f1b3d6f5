#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "models/model_graph.hpp"
#include "sim/taskgraph/task_graph.hpp"
#include "strategies/buckets.hpp"
#include "strategies/layout.hpp"
#include "strategies/memory.hpp"
#include "strategies/spec.hpp"

namespace dtsim::strategies {

// A pass that allocates (forward) or frees (backward) its micro-batch's activations on a pipeline
// stage, by the end of `task`.
struct MemoryMark {
  int task = -1, stage = 0;
  double bytes = 0;
};

// What a strategy hands to the rest of the pipeline: the task graph to replay and the facts that
// follow from the schedule alone (FLOPs, memory).
struct Plan {
  taskgraph::TaskGraph graph;
  std::int64_t micro_batches = 1;       // per pipeline (gradient accumulation steps)
  double model_flops_per_step = 0;     // all GPUs together
  double hardware_flops_per_step = 0;  // adds recomputation
  MemoryBreakdown memory;              // of the worst rank
  int worst_rank = 0;
  std::vector<MemoryBreakdown> stage_memory;  // per pipeline stage
  // What the stack's allocator caches beyond stage_memory's peak, per stage (allocator_slack()),
  // and on the worst rank: a GPU holds both.
  std::vector<double> stage_allocator_slack;
  double allocator_slack = 0;
  std::size_t gradient_buckets = 0;           // per stage, data-parallel synchronisation
  std::vector<int> stage_layers;              // transformer blocks per stage
  int replicas = 1;                           // data-parallel replicas given their own compute
  int iterations_per_step = 1;                // local steps per simulated step (EASGD's period)
  std::size_t works_built = 0;                // Work values the planner built before sharing them
  // Host memory one GPU's share takes (worst stage): ZeRO-Offload's optimizer state and fp32
  // gradient partition, and offloaded activations.
  double host_optimizer_bytes = 0, host_gradient_bytes = 0, host_activation_bytes = 0;
  double host_bytes() const { return host_optimizer_bytes + host_gradient_bytes + host_activation_bytes; }
  double pcie_bytes_per_step = 0;  // per GPU, both directions: offloaded gradients, parameters, activations
  std::size_t zero3_gathers = 0, zero3_reduce_scatters = 0;  // per step, one rank
  // Per pipeline stage: weight versions kept, and how many updates behind sequential SGD the
  // weights its gradients are computed on are (PipeDream, PipeDream-2BW; 1 and 0 otherwise).
  std::vector<int> stage_weight_versions, stage_staleness;
  // Memory over a step, per stage: what the stage holds besides the step's own activations
  // (stage_memory's peak less its live activations, with the previous step's micro-batches still
  // in flight), then each pass's change as it ends, in the first replica. Empty under activation
  // offload. Full recomputation's one rebuilt block is not in it: the curve's peak is the stage's
  // peak less that.
  std::vector<double> stage_memory_floor;
  std::vector<MemoryMark> memory_marks;
  // Tasks each mechanism unit emitted (strategies/unit.hpp), by its name: what its count must equal.
  std::map<std::string, std::size_t> unit_tasks;
};

// Data x tensor x pipeline parallelism in one task graph. `g` is one tensor-parallel rank's slice
// of the model (models::BuildOptions::tensor). Compute runs on one GPU per pipeline stage of the
// first data-parallel replica, since every other replica and tensor rank repeats it exactly;
// collectives and transfers name all GPUs, so the network carries everybody's traffic.
// - Pipeline passes follow the schedule; activations and their gradients travel between stages
//   as transfers of the tensor the last layer before the boundary hands on, split t ways
//   (Megatron's scatter/gather).
// - Tensor-parallel collectives block the compute stream and are priced inline (two all-reduces
//   per block forward and two backward; all-gather/reduce-scatter pairs with sequence parallelism).
// - Gradients are synchronised in buckets as soon as the last backward produced them (DDP), by
//   all-reduce, or reduce-scatter plus a parameter all-gather after the step with ZeRO-1/2;
//   ZeRO-3 gathers each layer's parameters before its forward and backward.
Plan plan_training(const models::ModelGraph& g, const ParallelismSpec& p, const TrainingSpec& t, const HostSpec& host);
// The same on a layout already made: `k` is layout_of(g, p, t).
Plan plan_training(const models::ModelGraph& g, const Layout& k, const ParallelismSpec& p, const TrainingSpec& t,
                   const HostSpec& host);

// What plan_training decides before it emits tasks, for closed-form estimates: the layout (each
// model chunk's layers included) and the Plan's micro-batches, stage layers, memory and FLOPs
// exactly as plan_training gives them (its graph left empty).
struct PlanLayout {
  Layout layout;
  Plan plan;
};
PlanLayout plan_layout(const models::ModelGraph& g, const ParallelismSpec& p, const TrainingSpec& t, const HostSpec& host);

}  // namespace dtsim::strategies
