#pragma once
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace dtsim {

// Measured (size, value) points, sizes increasing: linear in log size between them, the end
// values beyond them.
inline double log_interpolate(const std::vector<std::pair<double, double>>& points, double x) {
  if (x <= points.front().first) return points.front().second;
  if (x >= points.back().first) return points.back().second;
  auto hi = std::upper_bound(points.begin(), points.end(), x, [](double v, const auto& p) { return v < p.first; });
  auto lo = hi - 1;
  const double f = std::log(x / lo->first) / std::log(hi->first / lo->first);
  return lo->second + f * (hi->second - lo->second);
}

}  // namespace dtsim
