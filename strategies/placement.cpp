#include "strategies/placement.hpp"

namespace dtsim::strategies {

std::vector<int> Placement::tensor_group(int d, int s) const {
  std::vector<int> g;
  for (int t = 0; t < tensor; ++t) g.push_back(gpu(d, s, t));
  return g;
}

std::vector<int> Placement::data_group(int s, int t) const {
  std::vector<int> g;
  for (int d = 0; d < data; ++d) g.push_back(gpu(d, s, t));
  return g;
}

}  // namespace dtsim::strategies
