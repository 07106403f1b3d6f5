#include "sim/results/ranking.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace dtsim::results {

namespace {
int sign(double v) { return (v > 0) - (v < 0); }
}  // namespace

// O(n^2) pair count: validation sets hold tens of rows, not thousands.
std::optional<double> kendall_tau_b(const std::vector<double>& x, const std::vector<double>& y) {
  const std::size_t n = std::min(x.size(), y.size());
  if (n < 2) return std::nullopt;
  double concordant = 0, discordant = 0, tied_x = 0, tied_y = 0;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = i + 1; j < n; ++j) {
      const int sx = sign(x[i] - x[j]), sy = sign(y[i] - y[j]);
      if (sx == 0) ++tied_x;
      if (sy == 0) ++tied_y;
      if (sx != 0 && sy != 0) (sx == sy ? concordant : discordant) += 1;
    }
  const double pairs = static_cast<double>(n) * static_cast<double>(n - 1) / 2.0;
  const double denom = std::sqrt((pairs - tied_x) * (pairs - tied_y));
  if (denom == 0) return std::nullopt;
  return (concordant - discordant) / denom;
}

bool top1_hit(const std::vector<double>& predicted, const std::vector<double>& measured) {
  const std::size_t n = std::min(predicted.size(), measured.size());
  if (n == 0) return false;
  const auto best = static_cast<std::size_t>(std::min_element(predicted.begin(), predicted.begin() + static_cast<std::ptrdiff_t>(n)) - predicted.begin());
  const double fastest = *std::min_element(measured.begin(), measured.begin() + static_cast<std::ptrdiff_t>(n));
  return measured[best] == fastest;
}

}  // namespace dtsim::results
