#pragma once
#include <cstdint>
#include <utility>
#include <vector>

// Variability: seeded per-GPU slowdowns, and failures with checkpoint/restart over a long run.
namespace dtsim::faults {

enum class Jitter { None, Exponential, Lognormal, Empirical };

struct StragglerSpec {
  bool enabled = false;
  std::uint64_t seed = 1;
  Jitter jitter = Jitter::None;
  double mean = 0;             // exponential: compute time x (1 + X), X ~ Exp(mean)
  double sigma = 0;            // lognormal: compute time x exp(sigma Z), Z ~ N(0, 1)
  std::vector<double> values;  // empirical: a multiplier drawn uniformly per GPU and step
  std::vector<std::pair<int, double>> slow_gpus;  // GPU -> constant slowdown
  struct Throttle {
    int gpu = 0;
    double start_s = 0, duration_s = 0, slowdown = 1;
  };
  struct Flap {
    int gpu = 0;
    double period_s = 0, degraded_s = 0, bandwidth_fraction = 1;
    double degraded_latency_s = -1;  // the NIC link's latency while degraded; -1 leaves it
  };
  std::vector<Throttle> throttles;  // a GPU slowed for a time window (SimGrid backend)
  std::vector<Flap> flapping_links;  // a GPU's NIC periodically degraded (SimGrid backend)
};

struct FaultSpec {
  bool enabled = false;
  double gpu_mtbf_s = 0, node_mtbf_s = 0;  // 0: that kind never fails
  double checkpoint_interval_s = 0;       // compute time between checkpoints; 0: Daly's optimum
  double checkpoint_save_s = 0;           // delta: writing one checkpoint
  double restart_s = 0;                   // R: detecting the failure, restarting, reading the checkpoint
};

struct FaultReport {
  double system_mtbf_s = 0;
  double young_interval_s = 0, daly_interval_s = 0, interval_s = 0;
  double goodput = 1, goodput_at_daly = 1;  // useful compute time / wall time
  double expected_failures = 0;
  double ideal_time_s = 0, expected_time_s = 0;  // for the planned steps
};

// Young (1974): tau = sqrt(2 delta M).
double young_interval(double delta, double mtbf);
// Daly (2006), Eq. 37: sqrt(2 delta M) [1 + sqrt(delta/2M)/3 + (delta/2M)/9] - delta for delta < 2M,
// else M.
double daly_interval(double delta, double mtbf);
// Daly (2006), Eq. 20: expected wall time to finish `solve` seconds of work checkpointing every
// tau: M e^(R/M) (e^((tau + delta)/M) - 1) solve / tau.
double expected_wall_time(double solve, double tau, double delta, double restart, double mtbf);

FaultReport analyse_faults(const FaultSpec& f, int gpus, int nodes, double step_time_s, std::int64_t steps);

}  // namespace dtsim::faults
