#pragma once
#include <vector>

#include "strategies/spec.hpp"

namespace dtsim::strategies {

// Where each (data, stage, tensor, context) coordinate lives: GPU ids count GPUs node by node.
// Context ranks come right after tensor ranks (Megatron-Core's order tp, cp, dp, pp), so a
// tensor x context group fills NVLink domains first.
struct Placement {
  int data = 1, pipeline = 1, tensor = 1, context = 1;
  bool pipeline_outer = false;

  explicit Placement(const ParallelismSpec& p)
      : data(p.data), pipeline(p.pipeline), tensor(p.tensor), context(p.context), pipeline_outer(p.pipeline_outer) {}
  int gpu(int d, int s, int t, int c = 0) const {
    const int inner = tensor * context;
    return t + tensor * c + inner * (pipeline_outer ? d + data * s : s + pipeline * d);
  }
  std::vector<int> tensor_group(int d, int s) const;
  // Every data and context rank holding tensor rank t of stage s: they sum the same gradients.
  std::vector<int> data_group(int s, int t) const;
  std::vector<int> context_group(int d, int s, int t) const;
  // HSDP: the `size` consecutive data ranks from `first` (and their context ranks) that shard
  // the parameters together, nearest each other in the rank order as torchtitan's device mesh
  // puts dp_shard inside dp_replicate; and the data ranks j, j + size, ... holding the same shard.
  std::vector<int> shard_group(int s, int t, int first, int size) const;
  std::vector<int> replicate_group(int s, int t, int c, int j, int size) const;
};

// Blocks per stage that minimise the slowest stage's time when stage s runs `slowdown[s]` times
// slower (its slowest GPU sets its pace): each block in turn goes to the stage it delays least,
// which is optimal for this min-max split. Every stage keeps at least one block.
std::vector<int> balance_stages(int blocks, const std::vector<double>& slowdown);

}  // namespace dtsim::strategies
