#include "strategies/placement.hpp"

namespace dtsim::strategies {

std::vector<int> Placement::tensor_group(int d, int s) const {
  std::vector<int> g;
  for (int t = 0; t < tensor; ++t) g.push_back(gpu(d, s, t));
  return g;
}

std::vector<int> Placement::data_group(int s, int t) const {
  std::vector<int> g;
  for (int d = 0; d < data; ++d)
    for (int c = 0; c < context; ++c) g.push_back(gpu(d, s, t, c));
  return g;
}

std::vector<int> Placement::shard_group(int s, int t, int first, int size) const {
  std::vector<int> g;
  for (int d = first; d < first + size; ++d)
    for (int c = 0; c < context; ++c) g.push_back(gpu(d, s, t, c));
  return g;
}

std::vector<int> Placement::replicate_group(int s, int t, int c, int j, int size) const {
  std::vector<int> g;
  for (int d = j; d < data; d += size) g.push_back(gpu(d, s, t, c));
  return g;
}

std::vector<int> Placement::context_group(int d, int s, int t) const {
  std::vector<int> g;
  for (int c = 0; c < context; ++c) g.push_back(gpu(d, s, t, c));
  return g;
}

std::vector<int> balance_stages(int blocks, const std::vector<double>& slowdown) {
  std::vector<int> out(slowdown.size(), 1);
  for (int left = blocks - static_cast<int>(slowdown.size()); left > 0; --left) {
    std::size_t best = 0;
    for (std::size_t s = 1; s < out.size(); ++s)
      if ((out[s] + 1) * slowdown[s] < (out[best] + 1) * slowdown[best]) best = s;
    ++out[best];
  }
  return out;
}

}  // namespace dtsim::strategies
