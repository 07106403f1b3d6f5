#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "models/model_graph.hpp"
#include "sim/taskgraph/task_graph.hpp"
#include "strategies/buckets.hpp"
#include "strategies/memory.hpp"
#include "strategies/spec.hpp"

namespace dtsim::strategies {

// What a strategy hands to the rest of the pipeline: the task graph to replay and the facts that
// follow from the schedule alone (FLOPs, memory).
struct Plan {
  taskgraph::TaskGraph graph;
  std::int64_t accumulation_steps = 1;
  double model_flops_per_step = 0;     // all GPUs together
  double hardware_flops_per_step = 0;  // adds recomputation
  MemoryBreakdown memory;              // of the worst rank
  int worst_rank = 0;
  std::vector<Bucket> buckets;
};

// Synchronous data parallelism as PyTorch DDP runs it: every rank runs forward and backward of
// each micro-batch; on the last micro-batch each gradient bucket is all-reduced as soon as
// backward has produced it (overlapping the rest of backward), then the optimizer steps.
Plan plan_data_parallel(const models::ModelGraph& g, const ParallelismSpec& p, const TrainingSpec& t);

}  // namespace dtsim::strategies
