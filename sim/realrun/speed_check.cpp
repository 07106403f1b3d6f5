#include "sim/realrun/speed_check.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <utility>

#include <fmt/format.h>

#include "sim/profile/timing_stats.hpp"

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

SpeedCheck check_speed(const std::vector<std::vector<double>>& companions, double training_compute_s,
                       double training_cpu_s, double table_compute_s, int warmup, double tolerance) {
  SpeedCheck c;
  c.table_compute_s = table_compute_s;
  c.training_compute_s = training_compute_s;
  c.training_cpu_s = training_cpu_s;
  if (training_compute_s > 0) c.cpu_share = training_cpu_s / training_compute_s;
  if (c.cpu_share < kMinCpuShare) {
    c.trusted = false;
    c.why.push_back(fmt::format("the workers ran on their cores only {:.0f} % of their compute's wall time: other "
                                "processes had the CPUs, and dtsim predicts the step on cores of its own",
                                100 * c.cpu_share));
  }
  std::vector<double> all;
  for (const auto& steps : companions)
    for (std::size_t i = static_cast<std::size_t>(std::max(0, warmup)); i < steps.size(); ++i) all.push_back(steps[i]);
  c.samples = static_cast<int>(all.size());
  if (c.samples < kMinSpeedSamples || training_compute_s <= 0) {
    c.why.push_back(fmt::format("{} companion step(s) while profiling, {} needed to compare speeds", c.samples, kMinSpeedSamples));
    return c;
  }
  c.profiling_compute_s = profile::median_of(std::move(all));
  c.drift = c.profiling_compute_s / training_compute_s - 1;
  c.checked = true;
  if (std::abs(c.drift) > tolerance) {
    c.trusted = false;
    c.why.push_back(fmt::format("the same compute took {:.1f} % {} while the kernels were profiled than in training: "
                                "the machine ran it at another speed in training (its speed changed, or other work, such "
                                "as a parameter server on the workers' cores, shared their caches), and the prediction "
                                "carries about that error",
                                100 * std::abs(c.drift), c.drift > 0 ? "longer" : "less time"));
  }
  c.table_gap = table_compute_s / c.profiling_compute_s - 1;
  if (table_compute_s > 0 && std::abs(c.table_gap) > kTableTolerance) {
    c.trusted = false;
    c.why.push_back(fmt::format("the kernel table prices the compute at {:.2f} ms, but the same compute run beside the "
                                "profiler took {:.2f} ms: the table's samples did not see the machine as a step does",
                                1e3 * table_compute_s, 1e3 * c.profiling_compute_s));
  }
  return c;
}

}  // namespace dtsim::realrun
