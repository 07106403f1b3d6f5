#include "sim/results/torus_layout.hpp"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <set>

namespace dtsim::results {

std::vector<int> torus_order(const config::Scenario& s) {
  const auto& dims = s.cluster.torus_dims;
  const std::int64_t tensor = s.parallelism.tensor, inner = tensor * s.parallelism.context;
  std::vector<std::size_t> order(dims.size());
  std::iota(order.begin(), order.end(), 0);
  while (!dims.empty()) {
    std::vector<int> laid;
    std::set<std::int64_t> whole{1};
    std::int64_t chips = 1;
    for (std::size_t k : order) whole.insert(chips *= laid.emplace_back(dims[k]));
    if (whole.contains(tensor) && whole.contains(inner)) return laid;
    if (!std::next_permutation(order.begin(), order.end())) break;
  }
  return {};
}

network::ClusterSpec laid_out_cluster(const config::Scenario& s) {
  network::ClusterSpec c = s.cluster;
  if (auto order = torus_order(s); !order.empty()) c.torus_dims = std::move(order);
  return c;
}

}  // namespace dtsim::results
