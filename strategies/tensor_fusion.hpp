#pragma once
// Horovod's tensor fusion (docs/stacks.md, "Horovod"): a background thread wakes once per cycle,
// learns which gradients every rank has ready, and all-reduces them in fusion buffers of at most
// the threshold. Gradients are cut into buffers by when they are ready, not by size alone as
// PyTorch DDP's buckets are (strategies/buckets.hpp). The unit that emits the negotiation and
// prices the buffer copies is strategies/units/tensor_fusion.cpp.
#include <vector>

#include "strategies/buckets.hpp"

namespace dtsim::strategies {

struct TensorFusion {
  double cycle_s = 0;  // 0: off (DDP's buckets)
  double threshold_bytes = 0;
  // Horovod's response cache (v0.19.0 and later, on by default): a known tensor is negotiated by one
  // bit-vector all-reduce per cycle instead of the coordinator's gather and broadcast.
  bool response_cache = false;
  // Priced from the cost model when the scenario is loaded (sim/config/tensor_fusion_inputs.cpp),
  // so the planner, the budget and the docs see one cut: each layer's gradients are ready when its
  // final backward ends, seconds after that backward starts (model order, the stage's layers);
  // and the seconds to copy one byte into or out of the fusion buffer (read and write, HBM).
  std::vector<double> ready_s;
  double copy_s_per_byte = 0;
  bool on() const { return cycle_s > 0; }
};

// Fusion buffers in the order they are all-reduced: gradients in reverse layer order (as backward
// produces them) each join the first cycle tick at or after it is ready (ticks at k x cycle from
// the final backward's start); one tick's gradients are fused in that order, a new buffer opened
// where the next would pass the threshold (Horovod's FuseResponses; a tensor larger than the
// threshold goes alone). Without ready times for every layer, all are ready at the first tick.
std::vector<Bucket> fusion_buffers(const std::vector<const models::Layer*>& layers, double grad_bytes_per_param,
                                   const TensorFusion& f, BucketParams which = BucketParams::All);

}  // namespace dtsim::strategies
