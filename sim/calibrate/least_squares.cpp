#include "sim/calibrate/least_squares.hpp"

#include <cmath>
#include <limits>

namespace dtsim::calibrate {

namespace {

struct Sums {
  double s00 = 0, s01 = 0, s11 = 0, r0 = 0, r1 = 0;
};

Sums sums(const std::vector<Equation>& rows) {
  Sums s;
  for (const auto& e : rows) {
    s.s00 += e.a0 * e.a0;
    s.s01 += e.a0 * e.a1;
    s.s11 += e.a1 * e.a1;
    s.r0 += e.a0 * e.rhs;
    s.r1 += e.a1 * e.rhs;
  }
  return s;
}

// The best x_free with the other unknown held at `held` (one-dimensional least squares).
double best_one(double s_ff, double s_fh, double r_f, double held) { return s_ff > 0 ? (r_f - s_fh * held) / s_ff : 0.0; }

}  // namespace

double sum_of_squares(const std::vector<Equation>& rows, const std::array<double, 2>& x) {
  double total = 0;
  for (const auto& e : rows) {
    const double r = e.a0 * x[0] + e.a1 * x[1] - e.rhs;
    total += r * r;
  }
  return total;
}

bool separable(const std::vector<Equation>& rows) {
  const Sums s = sums(rows);
  if (!(s.s00 > 0) || !(s.s11 > 0)) return false;
  return std::fabs(s.s01) / std::sqrt(s.s00 * s.s11) < 1 - 1e-9;
}

std::optional<std::array<double, 2>> solve(const std::vector<Equation>& rows, const Bounds& b) {
  if (rows.empty()) return std::nullopt;
  const Sums s = sums(rows);
  std::vector<std::array<double, 2>> candidates;
  auto feasible = [&](const std::array<double, 2>& x) {
    for (int i = 0; i < 2; ++i)
      if (!std::isfinite(x[i]) || x[i] < b.min[i] || (b.fixed[i] && x[i] != *b.fixed[i])) return false;
    return true;
  };
  if (!b.fixed[0] && !b.fixed[1] && separable(rows)) {
    const double det = s.s00 * s.s11 - s.s01 * s.s01;
    candidates.push_back({(s.r0 * s.s11 - s.r1 * s.s01) / det, (s.r1 * s.s00 - s.r0 * s.s01) / det});
  }
  // One unknown held (at its fixed value or its bound), the other at its best, then clamped.
  for (int held = 0; held < 2; ++held) {
    const int free = 1 - held;
    if (b.fixed[free]) continue;
    const double h = b.fixed[held] ? *b.fixed[held] : b.min[held];
    const double s_ff = free == 0 ? s.s00 : s.s11, r_f = free == 0 ? s.r0 : s.r1;
    std::array<double, 2> x{};
    x[held] = h;
    x[free] = std::max(b.min[free], best_one(s_ff, s.s01, r_f, h));
    candidates.push_back(x);
  }
  candidates.push_back({b.fixed[0].value_or(b.min[0]), b.fixed[1].value_or(b.min[1])});
  std::optional<std::array<double, 2>> best;
  double best_ss = std::numeric_limits<double>::infinity();
  for (const auto& x : candidates) {
    if (!feasible(x)) continue;
    const double ss = sum_of_squares(rows, x);
    if (ss < best_ss) best = x, best_ss = ss;
  }
  return best;
}

}  // namespace dtsim::calibrate
