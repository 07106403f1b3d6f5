#pragma once
// How well predictions order a set of configurations: what a planner relies on when dtsim picks
// the fastest strategy, even where every absolute figure is off by the same amount.
#include <optional>
#include <vector>

namespace dtsim::results {

// Kendall's tau-b between two orderings of the same items (Kendall 1945, "The treatment of ties
// in ranking problems", Biometrika 33: tau-b = (C - D) / sqrt((n0 - n1)(n0 - n2)), n0 = n(n-1)/2,
// n1 and n2 the pairs tied in x and in y). 1: same order, -1: reversed. Empty when fewer than two
// items, or when every item ties in x or in y (the ratio is undefined).
std::optional<double> kendall_tau_b(const std::vector<double>& x, const std::vector<double>& y);

// Whether the item smallest in `predicted` is also smallest in `measured` (ties: any of the
// measured smallest counts). False for no items.
bool top1_hit(const std::vector<double>& predicted, const std::vector<double>& measured);

}  // namespace dtsim::results
