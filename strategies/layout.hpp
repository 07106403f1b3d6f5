#pragma once
// A strategy's shape, derived once from the parallelism and the batch: micro-batches, model
// chunks, stages, the replicas given their own tasks and where each rank sits. The planner, the
// budget's estimate (sim/results/budget.cpp) and the closed form (sim/results/closed_form.cpp)
// read these from here instead of deriving them each.
#include <cstdint>
#include <vector>

#include "models/model_graph.hpp"
#include "strategies/placement.hpp"
#include "strategies/recompute.hpp"
#include "strategies/spec.hpp"

namespace dtsim::strategies {

struct Layout {
  explicit Layout(const ParallelismSpec& p) : place(p) {}

  int data = 1, tensor = 1, pipeline = 1, context = 1, expert = 1;
  int virtual_stages = 1;  // model chunks per stage: interleaved 1F1B's v, otherwise 1
  int chunks = 1;          // model chunks, pipeline x virtual_stages; chunk c runs on stage c % pipeline
  std::int64_t micro_batches = 1;  // per replica and step: the global batch over data x micro-batch size
  int grad_ranks = 1;      // data x context: the ranks that sum the same gradients
  int shard_ranks = 1;     // the ranks ZeRO shards over: grad_ranks, or shard_size x context (HSDP)
  int expert_data = 1;     // tensor x data / (expert x expert_tensor): the ranks that sum the same experts' gradients
  bool sync = true;        // synchronous updates
  int replicas = 1;        // data-parallel replicas given their own tasks (every one when asynchronous)
  int iterations = 1;      // local steps per simulated step (EASGD's period)
  Placement place;         // the GPU of each (data, stage, tensor, context) coordinate
  // Each model chunk's layers in model order; empty unless laid out over a model graph.
  std::vector<Layers> chunk_layers;
  // Which blocks recomputation reaches, over chunk_layers.
  Checkpoints checkpoints;

  int stage_of(int chunk) const { return chunk % pipeline; }
  int gpus() const { return data * pipeline * tensor * context; }
  // All of stage s's chunks' layers, in model order.
  Layers stage_layers(int s) const;
};

// The numbers alone (no model, no checks): what the budget counts with before anything is built.
Layout layout_of(const ParallelismSpec& p, const TrainingSpec& t);
// The numbers and each chunk's layers, after the checks the planner makes before it emits
// anything (std::invalid_argument naming what cannot be laid out).
Layout layout_of(const models::ModelGraph& g, const ParallelismSpec& p, const TrainingSpec& t);

// Model chunks in model order: blocks split evenly unless `blocks_per_chunk` gives each chunk's
// count, the embedding on the first chunk and the head on the last (chunk c on stage c % pipeline).
std::vector<Layers> split_chunks(const models::ModelGraph& g, int chunks, const std::vector<int>& blocks_per_chunk);

}  // namespace dtsim::strategies
