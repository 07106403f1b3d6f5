// A torus's all-reduce (TPU pods), dimension by dimension, and its closed form.
#include "sim/network/algorithms/builder.hpp"

namespace dtsim::network::algorithms {

using namespace detail;

LoweredCollective torus_rings(const Platform& pf, double bytes, const std::vector<int>& ranks, bool scatter, bool gather) {
  Builder b(pf);
  const auto& dims = pf.spec().torus_dims;
  if (ranks.size() < 2) return b.done();
  // One phase per dimension: every line of chips along it runs a bidirectional ring (half the
  // buffer each way round, on both directions of the links) over the share it holds.
  auto phase = [&](int k, double share) {
    const int d = dims[static_cast<std::size_t>(k)];
    if (d < 2) return;
    const double per_hop = (d - 1.0) / d * share / 2;
    for (int g = 0; g < pf.spec().num_gpus(); ++g) {
      if (pf.torus_coord(g, k) != 0) continue;  // one ring per line, from its first chip
      for (int dir : {1, -1}) {
        std::vector<std::pair<int, int>> hops;
        for (int i = 0, at = g; i < d; ++i, at = pf.torus_neighbour(at, k, dir))
          hops.push_back(b.endpoints(at, pf.torus_neighbour(at, k, dir)));
        b.chain(hops, per_hop);
      }
    }
    b.end_phase(d - 1.0);
  };
  const int n = static_cast<int>(dims.size());
  // share[k]: what each chip holds entering dimension k's reduce-scatter, S / (d_0 ... d_{k-1}).
  std::vector<double> share(static_cast<std::size_t>(n), bytes);
  for (int k = 1; k < n; ++k) share[static_cast<std::size_t>(k)] = share[static_cast<std::size_t>(k - 1)] / dims[static_cast<std::size_t>(k - 1)];
  if (scatter)
    for (int k = 0; k < n; ++k) phase(k, share[static_cast<std::size_t>(k)]);
  if (gather)
    for (int k = n - 1; k >= 0; --k) phase(k, share[static_cast<std::size_t>(k)]);
  return b.done();
}

double torus_closed_form(const std::vector<int>& dims, double bytes, double passes, double alpha, double bandwidth) {
  double t = 0, share = bytes;
  for (int d : dims) {
    if (d >= 2) t += passes * ((d - 1.0) / d * share / (2 * bandwidth) + (d - 1) * alpha);
    share /= d;
  }
  return t;
}

// Per pass and dimension every line of chips sends both ways round: 2 p hops.
FlowCount torus_flows(double p, double dimensions, double passes) { return {passes * dimensions * 2 * p, 2 * p, false}; }

}  // namespace dtsim::network::algorithms
