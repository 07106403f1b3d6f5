#pragma once
#include <vector>

#include "models/model_graph.hpp"

namespace dtsim::strategies {

struct Bucket {
  double bytes = 0;
  int ready_after_layer = 0;  // its last gradient is produced by this layer's backward
  int first_layer = 0;        // its first gradient: the highest layer index it holds
  int tensors = 0;            // gradient tensors it holds
  // Tensor fusion (strategies/tensor_fusion.hpp): the cycle tick it is all-reduced at, and whether
  // it is that tick's first buffer (the one that waits for the tick and its negotiation). -1: DDP.
  int tick = -1;
  bool opens_tick = false;
};

// Fills gradient buckets the way PyTorch DDP does: parameters in reverse order of definition
// (roughly the order backward produces them), the first bucket capped at `first_cap`, the rest at
// `cap`; a tensor larger than the cap gets a bucket of its own.
// `layers` in model order; ready_after_layer indexes into it.
// `which`: every parameter, or only the dense or the expert ones (models::Op::expert), whose
// gradients expert parallelism sums over different groups.
enum class BucketParams { All, Dense, Expert };
std::vector<Bucket> make_buckets(const std::vector<const models::Layer*>& layers, double grad_bytes_per_param, double cap,
                                 double first_cap, BucketParams which = BucketParams::All);

}  // namespace dtsim::strategies
