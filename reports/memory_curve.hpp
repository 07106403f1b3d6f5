#pragma once
// Memory over one step, per pipeline stage: what explains 1F1B's memory is how many micro-batches'
// activations a stage holds at once, and this draws it.
#include <string>
#include <vector>

#include "sim/results/result.hpp"

namespace dtsim::reports::memory_curve {

struct Point {
  double t, bytes;  // seconds into the step; what the stage's GPU holds from then on
};
// One curve per pipeline stage (its first replica's GPU), a step function over the first step:
// the stage's memory besides its live activations, the reserve included, then each forward's
// activations added and each backward's freed as the pass ends. Empty when the plan records no
// marks (activation offload) or nothing was timed.
std::vector<std::vector<Point>> curves(const results::Result& r);
// The curves on one scale with the device's capacity, as SVG; "" without curves.
std::string draw(const results::Result& r, double width = 900);

}  // namespace dtsim::reports::memory_curve
