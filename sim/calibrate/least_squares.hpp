#pragma once
// Linear least squares in two unknowns, in closed form (the 2x2 normal equations), with a lower
// bound on each: every fit of `dtsim calibrate` reduces to it, so a fit has no starting point,
// no random restart and one answer.
#include <array>
#include <optional>
#include <vector>

namespace dtsim::calibrate {

// One equation a0 x0 + a1 x1 = rhs, to hold as nearly as the others let it.
struct Equation {
  double a0 = 0, a1 = 0, rhs = 0;
};

struct Bounds {
  std::array<double, 2> min{0.0, 0.0};
  // An unknown the rows cannot tell (not identifiable) is held at the value given here.
  std::array<std::optional<double>, 2> fixed;
};

// The x minimising sum (a0 x0 + a1 x1 - rhs)^2 subject to x_i >= min_i: the unconstrained
// solution when it is feasible, else the best of the solutions with one or both unknowns at
// their bound. Rows that cannot separate the unknowns (collinear columns) leave the second at
// its bound unless it is fixed; std::nullopt when there is no row.
std::optional<std::array<double, 2>> solve(const std::vector<Equation>& rows, const Bounds& bounds);

// sum of squared residuals of x.
double sum_of_squares(const std::vector<Equation>& rows, const std::array<double, 2>& x);

// Whether the rows determine both unknowns: the columns, each scaled to unit length, are not
// parallel (|cos| below 1 - 1e-9) and neither is zero.
bool separable(const std::vector<Equation>& rows);

}  // namespace dtsim::calibrate
