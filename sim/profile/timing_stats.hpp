#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

// How kernels are timed, and whether the machine let them be timed well. Shared by the profilers
// and by tests that must know whether timings on this machine can be trusted.
namespace dtsim::profile {

// A median and how far the samples spread around it.
struct Timing {
  double median = 0;
  double spread = 0;  // 1.4826 MAD / median: a relative standard deviation robust to outliers
  int runs = 0;
  bool converged = false;  // the spread reached the target before the budget ended
};

// The median of a non-empty series.
double median_of(std::vector<double> v);

// Median and relative spread of a series of times (non-empty, positive median).
Timing summarize(std::vector<double> seconds);

// Warm-up runs, then samples until the spread is at most `target_spread` (after `min_runs`) or
// `budget_s` of sampling has passed or `max_runs` were taken. A kernel shorter than
// `min_sample_s` is run several times per sample, and the sample divided.
struct Protocol {
  int warmup = 2;
  int min_runs = 5;
  int max_runs = 200;
  double target_spread = 0.05;
  double budget_s = 1.0;
  double min_sample_s = 2e-4;
  // Bytes written before each sample (outside its time), so that the kernel finds its operands
  // in memory rather than in the cache its previous run left them in; 0: warm.
  double evict_bytes = 0;
};

// Times `run(times)`, which runs the kernel `times` times back to back.
Timing measure(const Protocol& p, const std::function<void(std::int64_t)>& run);

// The same decision on a series already taken, one sample at a time: whether sampling stops
// after `seconds` (the samples so far) at `elapsed_s` into the budget.
bool enough(const Protocol& p, const std::vector<double>& seconds, double elapsed_s);

// The machine while profiling: load averages before and after, and how much CPU time the process
// got against the wall clock (below the threads it ran, something else had the cores).
struct LoadProbe {
  LoadProbe();  // starts the clocks
  nlohmann::json finish(int threads) const;

  std::vector<double> loadavg_before;
  std::chrono::steady_clock::time_point wall_start;
  double cpu_start = 0;
};

// /proc/loadavg's 1, 5 and 15 minute averages; empty when unreadable.
std::vector<double> read_loadavg();
// Online CPUs.
int online_cpus();
// Seconds of CPU (user + system) this process has used.
double process_cpu_seconds();

// Why a table's timings cannot be trusted: entries whose spread stayed above the target, or a
// machine already loaded when profiling began. Empty when they can be.
struct TableTrust {
  std::vector<std::string> reasons;
  bool noisy() const { return !reasons.empty(); }
};
// Noisy when more than a tenth of the entries spread beyond `target_spread`, or when the 1-minute
// load average before profiling (`load_before`, negative when unknown) exceeded the `cpus` the
// profile's `threads` left free by more than half a CPU.
TableTrust judge(const std::vector<Timing>& entries, double target_spread, double load_before, int cpus, int threads);

}  // namespace dtsim::profile
