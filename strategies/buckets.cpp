#include "strategies/buckets.hpp"

namespace dtsim::strategies {

std::vector<Bucket> make_buckets(const std::vector<const models::Layer*>& layers, double grad_bytes_per_param, double cap,
                                 double first_cap, BucketParams which) {
  std::vector<Bucket> out;
  Bucket cur;
  bool open = false;
  for (int li = static_cast<int>(layers.size()) - 1; li >= 0; --li) {
    const auto& ops = layers[static_cast<std::size_t>(li)]->ops;
    for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
      double bytes = it->params * grad_bytes_per_param;
      if (bytes <= 0) continue;
      if ((which == BucketParams::Dense && it->expert) || (which == BucketParams::Expert && !it->expert)) continue;
      double limit = out.empty() ? first_cap : cap;
      if (open && cur.bytes + bytes > limit) {
        out.push_back(cur);
        open = false;
      }
      if (!open) cur = Bucket{0, li, li};
      cur.bytes += bytes;
      ++cur.tensors;
      cur.ready_after_layer = li;
      open = true;
    }
  }
  if (open) out.push_back(cur);
  return out;
}

}  // namespace dtsim::strategies
