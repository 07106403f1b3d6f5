#include "strategies/tensor_fusion.hpp"

#include <cmath>

namespace dtsim::strategies {

namespace {
// The first tick at or after `ready`; a gradient ready on a tick (to within rounding) joins it.
int tick_of(double ready, double cycle) {
  if (ready <= 0) return 0;
  return static_cast<int>(std::ceil(ready / cycle - 1e-9));
}
}  // namespace

std::vector<Bucket> fusion_buffers(const std::vector<const models::Layer*>& layers, double grad_bytes_per_param,
                                   const TensorFusion& f, BucketParams which) {
  const bool timed = f.ready_s.size() == layers.size();
  std::vector<Bucket> out;
  Bucket cur;
  bool open = false;
  for (int li = static_cast<int>(layers.size()) - 1; li >= 0; --li) {
    const int tick = timed ? tick_of(f.ready_s[static_cast<std::size_t>(li)], f.cycle_s) : 0;
    const auto& ops = layers[static_cast<std::size_t>(li)]->ops;
    for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
      if ((which == BucketParams::Dense && it->expert) || (which == BucketParams::Expert && !it->expert)) continue;
      // Horovod all-reduces tensor by tensor: a linear's weight and bias are two requests.
      const auto tensors = models::param_tensors(*it);
      for (auto t = tensors.rbegin(); t != tensors.rend(); ++t) {
        const double bytes = *t * grad_bytes_per_param;
        if (bytes <= 0) continue;
        if (open && (tick != cur.tick || cur.bytes + bytes > f.threshold_bytes)) {
          out.push_back(cur);
          open = false;
        }
        if (!open) {
          cur = Bucket{0, li, li};
          cur.tick = tick;
          cur.opens_tick = out.empty() || out.back().tick != tick;
          open = true;
        }
        cur.bytes += bytes;
        ++cur.tensors;
        cur.ready_after_layer = li;
      }
    }
  }
  if (open) out.push_back(cur);
  return out;
}

}  // namespace dtsim::strategies
