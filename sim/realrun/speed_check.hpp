#pragma once
#include <string>
#include <vector>

// Whether the machine ran at one speed while realrun trained and while it profiled the kernels.
// The prediction prices the step with kernels timed minutes, or seconds, after the training; on
// a shared VM the same work's CPU speed moves between runs (a tiny-gpt step's compute took
// 40-60 ms from one run to the next on this project's VM). The companions that keep the other
// cores busy while the kernels are profiled run exactly a worker's compute, so their step times
// against the workers' tell the two phases' speeds apart without any model in between.
namespace dtsim::realrun {

// A 5 % drift in compute moves a compute-bound step's prediction by about as much: half the
// 10 % the comparison is judged by.
inline constexpr double kSpeedTolerance = 0.05;
inline constexpr int kMinSpeedSamples = 3;
// The prediction is for cores the workers hold. Quiet, the workers' compute ran on their CPU
// 95-100 % of its wall time on this project's VM; with compilers beside them, 24-51 %, while
// their CPU time stayed at 41-44 ms a step.
inline constexpr double kMinCpuShare = 0.9;
// The kernel table against the same compute timed beside the profiler, at the same time: over
// 10 % apart, the table's samples did not see the machine a step sees (on this project's VM,
// quiet runs agreed within 7 %; one table came out 22 % below its companions' steps).
inline constexpr double kTableTolerance = 0.10;

struct SpeedCheck {
  double training_compute_s = 0;   // the workers' median compute per step, in training
  double training_cpu_s = 0;       // the CPU time the slowest worker got meanwhile
  double cpu_share = 1;            // training_cpu_s / training_compute_s
  double profiling_compute_s = 0;  // the companions' median compute per step, while profiling
  int samples = 0;                 // companion steps behind that median
  double drift = 0;                // profiling / training - 1
  double table_compute_s = 0;      // the compute as the kernel table prices it
  double table_gap = 0;            // table / profiling - 1
  bool checked = false;            // enough companion steps to compare the two phases
  bool trusted = true;             // cores held, and (when checked) drift and table gap within tolerance
  std::vector<std::string> why;    // each reason the comparison cannot be trusted, or was not checked
};

// A companion's report: one "wall_s cpu_s" line per finished step (see run_worker).
std::vector<double> companion_steps(const std::string& output);

// `companions` holds every companion's step times, in order; each companion's first
// `warmup` steps (page faults, cold caches) are left out, as the workers' are. A table_compute_s
// of 0 leaves the table out of the check.
SpeedCheck check_speed(const std::vector<std::vector<double>>& companions, double training_compute_s,
                       double training_cpu_s, double table_compute_s, int warmup, double tolerance = kSpeedTolerance);

}  // namespace dtsim::realrun
