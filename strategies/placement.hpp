#pragma once
#include <vector>

#include "strategies/spec.hpp"

namespace dtsim::strategies {

// Where each (data, stage, tensor) coordinate lives: GPU ids count GPUs node by node.
struct Placement {
  int data = 1, pipeline = 1, tensor = 1;
  bool pipeline_outer = false;

  explicit Placement(const ParallelismSpec& p)
      : data(p.data), pipeline(p.pipeline), tensor(p.tensor), pipeline_outer(p.pipeline_outer) {}
  int gpu(int d, int s, int t) const {
    return pipeline_outer ? t + tensor * (d + data * s) : t + tensor * (s + pipeline * d);
  }
  std::vector<int> tensor_group(int d, int s) const;
  std::vector<int> data_group(int s, int t) const;
};

}  // namespace dtsim::strategies
