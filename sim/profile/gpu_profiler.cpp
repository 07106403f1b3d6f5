#include "sim/profile/gpu_profiler.hpp"

#include <algorithm>
#include <ctime>
#include <set>
#include <tuple>

#include "sim/profile/cuda_timing.hpp"
#include "sim/profile/timing_stats.hpp"

namespace dtsim::profile {

bool gpu_available(std::string& why) {
  cuda::DeviceInfo info;
  return cuda::probe(info, why);
}

cost::KernelTable profile_gpu(const std::vector<models::Kernel>& kernels, const std::string& dtype, const Options& o) {
  cuda::DeviceInfo info;
  std::string why;
  if (!cuda::probe(info, why)) throw std::runtime_error(why);
  cost::KernelTable t;
  std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  t.provenance = {{"device", "cuda"},
                  {"gpu", info.name},
                  {"compute_capability", std::to_string(info.cc_major) + "." + std::to_string(info.cc_minor)},
                  {"sm_count", info.sm_count},
                  {"sm_clock_mhz", info.sm_clock_mhz},
                  {"memory_clock_mhz", info.memory_clock_mhz},
                  {"cuda_driver", info.driver_version},
                  {"cuda_runtime", info.runtime_version},
                  {"cublas", info.cublas_version},
                  {"dtype", dtype},
                  {"date", date}};
  t.dtype = dtype;
  std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>> shapes;
  std::set<double> sizes;
  // Convolutions run as the cuBLAS GEMM of their implicit-GEMM shape (what cuDNN's
  // IMPLICIT_GEMM algorithms compute, without their im2col-free tiling).
  std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>> convs;
  for (const auto& k : kernels) {
    if (k.kind == models::KernelKind::Memory) sizes.insert(k.bytes);
    else if (k.kind == models::KernelKind::Conv) convs.insert({k.batch, k.m, k.n, k.k});
    else shapes.insert({k.batch, k.m, k.n, k.k});
  }
  // Square GEMMs and streams across the range, for the kernels a table does not list.
  for (std::int64_t s = 256; s <= 16384; s *= 2) shapes.insert({1, s, s, s});
  for (double b = 4.0 * 1024; b <= 4.0 * 1024 * 1024 * 1024; b *= 4) sizes.insert(b);
  // The CPU profiler's protocol on CUDA events: warm-up runs, then at least 10 samples per kernel;
  // the median kept with its spread, and the table marked noisy when too many spread widely.
  const int warmup = std::max(o.warmup, 3);  // clocks and cuBLAS heuristics settle
  const int repeats = std::max(o.repeats, 10);
  std::vector<Timing> all;
  const auto timed = [&](std::vector<double> samples) {
    all.push_back(summarize(std::move(samples)));
    return all.back();
  };
  for (const auto& [batch, m, n, k] : shapes) {
    const Timing x = timed(cuda::time_gemm(batch, m, n, k, dtype, warmup, repeats));
    t.gemms.push_back({batch, m, n, k, x.median, x.spread, x.runs});
  }
  for (const auto& [batch, m, n, k] : convs) {
    const Timing x = timed(cuda::time_gemm(batch, m, n, k, dtype, warmup, repeats));
    t.convs.push_back({batch, m, n, k, x.median, x.spread, x.runs});
  }
  for (double b : sizes) {
    const double timed_bytes = std::min(b, kGpuMaxStreamBytes);
    const Timing x = timed(cuda::time_stream(timed_bytes, warmup, repeats));
    t.memory.push_back({b, x.median * b / timed_bytes, x.spread, x.runs});
  }
  // Recorded, not priced: launches are asynchronous, so a kernel longer than the launch hides it.
  // To price it (a stream of short kernels), set the device profile's launch_overhead_us.
  t.provenance["launch_latency_us"] = cuda::time_launch(warmup, std::max(o.repeats, 5)) * 1e6;
  // A GPU's timings do not depend on the host's load; only their spread is judged.
  const auto trust = judge(all, o.target_spread, -1.0, online_cpus(), 1);
  t.noisy = trust.noisy();
  t.provenance["timing"] = {{"protocol", {{"warmup", warmup},
                                          {"runs", repeats},
                                          {"target_spread", o.target_spread},
                                          {"clock", "CUDA events around each run, default stream"},
                                          {"statistic", "median; spread = 1.4826 MAD / median"}}},
                            {"noisy_reasons", trust.reasons}};
  return t;
}

}  // namespace dtsim::profile
