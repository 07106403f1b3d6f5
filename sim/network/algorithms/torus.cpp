// A torus's all-reduce (TPU pods), dimension by dimension, over the whole torus or a sub-torus,
// and its closed form.
#include <algorithm>

#include "sim/network/algorithms/builder.hpp"

namespace dtsim::network::algorithms {

using namespace detail;

std::vector<int> torus_span(const Platform& pf, const std::vector<int>& ranks) {
  std::vector<int> spanned;
  if (!pf.torus() || ranks.size() < 2) return spanned;
  const int pod = pf.pod_of(ranks.front());
  if (std::any_of(ranks.begin(), ranks.end(), [&](int g) { return pf.pod_of(g) != pod; })) return spanned;
  std::size_t chips = 1;
  for (int k = 0; k < static_cast<int>(pf.spec().torus_dims.size()); ++k) {
    const int first = pf.torus_coord(ranks.front(), k);
    if (std::any_of(ranks.begin(), ranks.end(), [&](int g) { return pf.torus_coord(g, k) != first; })) {
      spanned.push_back(k);
      chips *= static_cast<std::size_t>(pf.spec().torus_dims[static_cast<std::size_t>(k)]);
    }
  }
  // As many distinct chips as the sub-torus through them holds: the group is all of it.
  if (chips != ranks.size()) return {};
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) return {};
  return spanned;
}

LoweredCollective torus_rings(const Platform& pf, double bytes, const std::vector<int>& ranks, const std::vector<int>& spanned,
                              bool scatter, bool gather) {
  Builder b(pf);
  const auto& dims = pf.spec().torus_dims;
  if (ranks.size() < 2) return b.done();
  std::vector<int> chips = ranks;  // in chip order, whatever the group's
  std::sort(chips.begin(), chips.end());
  // One phase per dimension: every line of the group's chips along it runs a bidirectional ring
  // (half the buffer each way round, on both directions of the links) over the share it holds.
  auto phase = [&](int k, double share) {
    const int d = dims[static_cast<std::size_t>(k)];
    const double per_hop = (d - 1.0) / d * share / 2;
    for (int g : chips) {
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
  const std::size_t n = spanned.size();
  // share[i]: what each chip holds entering the i-th spanned dimension's reduce-scatter.
  std::vector<double> share(n, bytes);
  for (std::size_t i = 1; i < n; ++i) share[i] = share[i - 1] / dims[static_cast<std::size_t>(spanned[i - 1])];
  if (scatter)
    for (std::size_t i = 0; i < n; ++i) phase(spanned[i], share[i]);
  if (gather)
    for (std::size_t i = n; i-- > 0;) phase(spanned[i], share[i]);
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
