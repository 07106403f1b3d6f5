#include "sim/realrun/speed_check.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include <fmt/format.h>

namespace dtsim::realrun {

std::vector<double> companion_steps(const std::string& output) {
  std::vector<double> steps;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    std::istringstream l(line);
    double wall = 0, cpu = 0;
    // A companion is killed mid-write at the end: a last partial line is not a step.
    if (l >> wall >> cpu && wall > 0 && std::isfinite(wall) && in.good()) steps.push_back(wall);
  }
  return steps;
}

SpeedCheck check_speed(const std::vector<std::vector<double>>& companions, double training_compute_s, int warmup,
                       double tolerance) {
  SpeedCheck c;
  c.training_compute_s = training_compute_s;
  std::vector<double> all;
  for (const auto& steps : companions)
    for (std::size_t i = static_cast<std::size_t>(std::max(0, warmup)); i < steps.size(); ++i) all.push_back(steps[i]);
  c.samples = static_cast<int>(all.size());
  if (c.samples < kMinSpeedSamples || training_compute_s <= 0) {
    c.why = fmt::format("{} companion step(s) while profiling, {} needed to compare speeds", c.samples, kMinSpeedSamples);
    return c;
  }
  std::sort(all.begin(), all.end());
  const std::size_t n = all.size();
  c.profiling_compute_s = n % 2 ? all[n / 2] : 0.5 * (all[n / 2 - 1] + all[n / 2]);
  c.drift = c.profiling_compute_s / training_compute_s - 1;
  c.checked = true;
  c.steady = std::abs(c.drift) <= tolerance;
  if (!c.steady)
    c.why = fmt::format("the same compute took {:.1f} % {} while the kernels were profiled than in training: the "
                        "machine's speed changed between the two, and the prediction carries about that error",
                        100 * std::abs(c.drift), c.drift > 0 ? "longer" : "less time");
  return c;
}

}  // namespace dtsim::realrun
