#include "sim/profile/cpu_profiler.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>

#include "sim/profile/cpu_loader.hpp"

namespace dtsim::profile {

namespace {

// The first value of a /proc/cpuinfo field ("model name", "cpu MHz").
std::string cpuinfo(const std::string& field) {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(field, 0) == 0 && line.find(':') != std::string::npos) {
      const auto v = line.find_first_not_of(" \t", line.find(':') + 1);
      return v == std::string::npos ? "" : line.substr(v);
    }
  return "";
}

// The highest clock cpufreq allows, in MHz; 0 where the kernel does not say (virtual machines).
double max_mhz() {
  std::ifstream in("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
  double khz = 0;
  return in >> khz ? khz / 1000.0 : 0.0;
}

std::string utc_now() {
  std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return date;
}

Timing timed(cpu::Kernel& k, const Options& o) {
  return measure(protocol(o), [&](std::int64_t times) { k.run(times); });
}

}  // namespace

Protocol protocol(const Options& o) {
  Protocol p;
  p.warmup = std::max(1, o.warmup);
  p.min_runs = std::max(3, o.repeats);
  p.target_spread = o.target_spread;
  p.budget_s = o.budget_s;
  p.evict_bytes = o.evict_bytes;
  return p;
}

double last_level_cache_bytes() {
  double largest = 0;
  for (int i = 0; i < 8; ++i) {
    std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/size");
    std::string size;
    if (!(in >> size) || size.empty()) continue;
    double v = std::atof(size.c_str());
    if (size.back() == 'K') v *= 1024;
    if (size.back() == 'M') v *= 1024 * 1024;
    largest = std::max(largest, v);
  }
  return largest;
}

Timing time_gemm(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k, const Options& o) {
  const std::int64_t timed_batch = std::min<std::int64_t>(batch, 4);
  cpu::Kernel kernel("gemm", timed_batch, m, n, k, 0);
  Timing t = timed(kernel, o);
  t.median *= static_cast<double>(batch) / static_cast<double>(timed_batch);
  return t;
}

Timing time_elementwise(const std::string& kind, double bytes, const Options& o) {
  cpu::Kernel kernel(kind, 1, 0, 0, 0, bytes);
  return timed(kernel, o);
}

Timing time_launch(const Options& o) {
  cpu::Kernel kernel("launch", 1, 0, 0, 0, 0);
  return timed(kernel, o);
}

Timing time_fork_join(const Options& o) {
  cpu::Kernel kernel("fork_join", 1, 0, 0, 0, 0);
  return timed(kernel, o);
}

namespace {

// models::ConvShape in the plugin's order (dtsim_cpu_conv_new).
std::array<long long, 12> conv_shape(const models::ConvShape& c) {
  return {c.n, c.c, c.h, c.w, c.k, c.r, c.s, c.stride_h, c.stride_w, c.pad_h, c.pad_w, c.groups};
}

const char* conv_kind(models::ConvPass pass) {
  switch (pass) {
    case models::ConvPass::Forward: return "conv_fwd";
    case models::ConvPass::Dgrad: return "conv_dgrad";
    case models::ConvPass::Wgrad: return "conv_wgrad";
  }
  return "";
}

}  // namespace

std::vector<float> conv2d(const std::vector<float>& x, const std::vector<float>& w, const models::ConvShape& c) {
  const auto need = [](std::int64_t v) { return static_cast<std::size_t>(std::max<std::int64_t>(v, 0)); };
  if (x.size() < need(c.n * c.c * c.h * c.w) || c.groups < 1 ||
      w.size() < need(c.k * (c.c / c.groups) * c.r * c.s))
    throw std::invalid_argument("conv2d: input or filters smaller than the shape");
  return cpu::conv2d(x, w, conv_shape(c), need(c.n * c.k * c.p() * c.q()));
}

// Groups are independent GEMMs of the same size, so at most 4 are timed and the time scaled.
Timing time_conv(const models::ConvShape& c, models::ConvPass pass, const Options& o) {
  const std::int64_t timed_groups = std::min<std::int64_t>(c.groups, 4);
  cpu::Kernel kernel(conv_kind(pass), conv_shape(c), timed_groups);
  Timing t = timed(kernel, o);
  t.median *= static_cast<double>(c.groups) / static_cast<double>(timed_groups);
  return t;
}

cost::KernelTable profile_cpu(const std::vector<models::Kernel>& kernels, const Options& o) {
  const LoadProbe load;
  cost::KernelTable t;
  t.provenance = cpu_provenance();
  t.dtype = "fp32";
  std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>> shapes;
  std::map<std::string, std::set<double>> sizes;  // by element-wise kind, "stream" for plain ones
  std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>> conv_shapes;
  std::vector<const models::Kernel*> convs;  // the first of each implicit-GEMM shape
  for (const auto& k : kernels) {
    if (k.kind == models::KernelKind::Conv) {
      if (conv_shapes.insert({k.batch, k.m, k.n, k.k}).second) convs.push_back(&k);
      continue;
    }
    if (k.kind != models::KernelKind::Memory) {
      shapes.insert({k.batch, k.m, k.n, k.k});
      continue;
    }
    const std::string kind = cost::elementwise_kind(k);
    sizes[kind.empty() ? "stream" : kind].insert(k.bytes);
  }
  for (std::int64_t s = 64; s <= 1024; s *= 2) shapes.insert({1, s, s, s});
  for (double b = 4.0 * 1024; b <= 256.0 * 1024 * 1024; b *= 4) sizes["stream"].insert(b);
  for (const char* kind : {"gelu", "softmax", "layernorm", "dropout"})
    for (double b = 4.0 * 1024; b <= 256.0 * 1024 * 1024; b *= 16) sizes[kind].insert(b);

  std::vector<Timing> all;
  for (const auto& [batch, m, n, k] : shapes) {
    const Timing x = time_gemm(batch, m, n, k, o);
    all.push_back(x);
    t.gemms.push_back({batch, m, n, k, x.median, x.spread, x.runs});
  }
  for (const models::Kernel* k : convs) {
    const Timing x = time_conv(k->conv, k->pass, o);
    all.push_back(x);
    t.convs.push_back({k->batch, k->m, k->n, k->k, x.median, x.spread, x.runs});
  }
  for (const auto& [kind, bytes] : sizes)
    for (double b : bytes) {
      const Timing x = time_elementwise(kind, b, o);
      all.push_back(x);
      (kind == "stream" ? t.memory : t.elementwise[kind]).push_back({b, x.median, x.spread, x.runs});
    }
  const Timing launch = time_launch(o);
  all.push_back(launch);
  t.launch_overhead_s = launch.median;
  t.launch_overhead_spread = launch.spread;
  const Timing fork = time_fork_join(o);

  const int threads = cpu::build().threads;
  const auto trust = judge(all, o.target_spread, load.loadavg_before.empty() ? -1.0 : load.loadavg_before[0],
                           online_cpus(), threads);
  t.noisy = trust.noisy();
  const Protocol p = protocol(o);
  t.provenance["timing"] = {{"protocol", {{"warmup", p.warmup},
                                          {"min_runs", p.min_runs},
                                          {"max_runs", p.max_runs},
                                          {"target_spread", p.target_spread},
                                          {"budget_s", p.budget_s},
                                          {"statistic", "median; spread = 1.4826 MAD / median"}}},
                            {"load", load.finish(threads)},
                            // Inside the parallel kernels' times, so not in launch_overhead_us.
                            {"fork_join_us", fork.median * 1e6},
                            {"fork_join_spread", fork.spread},
                            {"noisy_reasons", trust.reasons}};
  return t;
}

nlohmann::json cpu_provenance() {
  const auto& b = cpu::build();
  nlohmann::json j = {{"device", "cpu"},
                      {"cpu_model", cpuinfo("model name")},
                      {"cpu_mhz", std::atof(cpuinfo("cpu MHz").c_str())},
                      {"online_cpus", online_cpus()},
                      {"isa", b.isa},
                      {"simd", b.simd},
                      {"threads", b.threads},
                      {"compiler", b.compiler},
                      {"eigen", b.eigen},
                      {"dtype", "fp32"},
                      {"date", utc_now()}};
  if (const double mhz = max_mhz(); mhz > 0) j["cpu_max_mhz"] = mhz;
  if (j["cpu_model"] == "") j["cpu_model"] = "unknown";
  return j;
}

}  // namespace dtsim::profile
