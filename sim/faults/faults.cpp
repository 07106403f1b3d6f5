#include "sim/faults/faults.hpp"

#include <cmath>
#include <limits>

namespace dtsim::faults {

double young_interval(double delta, double mtbf) { return std::sqrt(2.0 * delta * mtbf); }

double daly_interval(double delta, double mtbf) {
  if (delta >= 2.0 * mtbf) return mtbf;
  const double x = delta / (2.0 * mtbf);
  return std::sqrt(2.0 * delta * mtbf) * (1.0 + std::sqrt(x) / 3.0 + x / 9.0) - delta;
}

double expected_wall_time(double solve, double tau, double delta, double restart, double mtbf) {
  if (!std::isfinite(mtbf)) return solve * (tau + delta) / tau;
  return mtbf * std::exp(restart / mtbf) * std::expm1((tau + delta) / mtbf) * solve / tau;
}

FaultReport analyse_faults(const FaultSpec& f, int gpus, int nodes, double step_time_s, std::int64_t steps) {
  FaultReport r;
  double rate = 0;  // failures per second of the whole job
  if (f.gpu_mtbf_s > 0) rate += gpus / f.gpu_mtbf_s;
  if (f.node_mtbf_s > 0) rate += nodes / f.node_mtbf_s;
  r.system_mtbf_s = rate > 0 ? 1.0 / rate : std::numeric_limits<double>::infinity();
  const double m = r.system_mtbf_s, delta = f.checkpoint_save_s;
  r.young_interval_s = std::isfinite(m) ? young_interval(delta, m) : 0.0;
  r.daly_interval_s = std::isfinite(m) ? daly_interval(delta, m) : 0.0;
  // Checkpoints happen between steps, so intervals are whole steps.
  auto whole_steps = [&](double s) { return std::max(1.0, std::round(s / step_time_s)) * step_time_s; };
  r.interval_s = whole_steps(f.checkpoint_interval_s > 0 ? f.checkpoint_interval_s
                                                          : (std::isfinite(m) ? r.daly_interval_s : 3600.0));
  const double solve = step_time_s * static_cast<double>(std::max<std::int64_t>(steps, 1));
  r.ideal_time_s = steps > 0 ? solve : 0.0;
  const double wall = expected_wall_time(solve, r.interval_s, delta, f.restart_s, m);
  r.goodput = solve / wall;
  r.goodput_at_daly = std::isfinite(m) ? solve / expected_wall_time(solve, whole_steps(r.daly_interval_s), delta, f.restart_s, m)
                                       : r.goodput;
  r.expected_time_s = steps > 0 ? wall : 0.0;
  r.expected_failures = std::isfinite(m) ? wall / m : 0.0;
  return r;
}

}  // namespace dtsim::faults
