#include "sim/profile/timing_stats.hpp"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <stdexcept>

namespace dtsim::profile {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

namespace {

double seconds_since(std::chrono::steady_clock::time_point a) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
}

}  // namespace

Timing summarize(std::vector<double> seconds) {
  if (seconds.empty()) throw std::invalid_argument("no timings to summarize");
  Timing t;
  t.runs = static_cast<int>(seconds.size());
  t.median = median_of(seconds);
  if (!(t.median > 0)) return t;
  for (double& s : seconds) s = std::abs(s - t.median);
  // 1.4826 MAD estimates the standard deviation of normally distributed samples.
  t.spread = 1.4826 * median_of(seconds) / t.median;
  return t;
}

bool enough(const Protocol& p, const std::vector<double>& seconds, double elapsed_s) {
  const int n = static_cast<int>(seconds.size());
  if (n >= p.max_runs || elapsed_s >= p.budget_s) return true;
  return n >= p.min_runs && summarize(seconds).spread <= p.target_spread;
}

Timing measure(const Protocol& p, const std::function<void(std::int64_t)>& run) {
  auto timed = [&](std::int64_t times) {
    const auto a = std::chrono::steady_clock::now();
    run(times);
    return seconds_since(a);
  };
  for (int i = 0; i < p.warmup; ++i) run(1);
  // Enough calls per sample that the clock's resolution and its own cost do not matter.
  std::int64_t times = 1;
  const double once = timed(1);
  if (once < p.min_sample_s) times = std::min<std::int64_t>(1'000'000, static_cast<std::int64_t>(p.min_sample_s / std::max(once, 1e-9)) + 1);
  std::vector<double> samples;
  thread_local std::vector<char> evict;  // kept: a fresh buffer per kernel would time page faults
  if (evict.size() < static_cast<std::size_t>(p.evict_bytes)) evict.resize(static_cast<std::size_t>(p.evict_bytes), 1);
  const auto start = std::chrono::steady_clock::now();
  do {
    for (std::size_t i = 0; i < static_cast<std::size_t>(p.evict_bytes); i += 64) evict[i] = static_cast<char>(evict[i] + 1);
    samples.push_back(timed(times) / static_cast<double>(times));
  } while (!enough(p, samples, seconds_since(start)));
  Timing t = summarize(samples);
  t.converged = t.spread <= p.target_spread;
  return t;
}

std::vector<double> read_loadavg() {
  std::ifstream in("/proc/loadavg");
  std::vector<double> out(3);
  if (!(in >> out[0] >> out[1] >> out[2])) return {};
  return out;
}

int online_cpus() { return std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)); }

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); };
  return s(u.ru_utime) + s(u.ru_stime);
}

LoadProbe::LoadProbe()
    : loadavg_before(read_loadavg()), wall_start(std::chrono::steady_clock::now()), cpu_start(process_cpu_seconds()) {}

nlohmann::json LoadProbe::finish(int threads) const {
  const double wall = seconds_since(wall_start), cpu = process_cpu_seconds() - cpu_start;
  return {{"loadavg_before", loadavg_before},
          {"loadavg_after", read_loadavg()},
          {"online_cpus", online_cpus()},
          {"wall_s", wall},
          {"cpu_s", cpu},
          // GEMMs use every thread, element-wise kernels one: a quiet machine gives between 1 and
          // `threads` here.
          {"cpu_per_wall", wall > 0 ? cpu / wall : 0.0},
          {"threads", threads}};
}

TableTrust judge(const std::vector<Timing>& entries, double target_spread, double load_before, int cpus, int threads) {
  TableTrust t;
  std::size_t spread_out = 0;
  double worst = 0;
  for (const auto& e : entries) {
    if (e.spread > target_spread) ++spread_out;
    worst = std::max(worst, e.spread);
  }
  if (!entries.empty() && static_cast<double>(spread_out) > 0.1 * static_cast<double>(entries.size()))
    t.reasons.push_back(fmt::format("{} of {} timings spread more than {:g}% (worst {:.1f}%)", spread_out,
                                    entries.size(), 100 * target_spread, 100 * worst));
  const double free_cpus = static_cast<double>(std::max(0, cpus - threads));
  if (load_before >= 0 && load_before > free_cpus + 0.5)
    t.reasons.push_back(fmt::format("load average {:.2f} before profiling on {} CPUs, {} of them used by the profile",
                                    load_before, cpus, threads));
  return t;
}

}  // namespace dtsim::profile
