#include "sim/profile/cpu_profiler.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <chrono>
#include <ctime>
#include <fstream>
#include <set>
#include <string>
#include <tuple>

namespace dtsim::profile {

namespace {

template <class F>
double median_seconds(const Options& o, F&& run) {
  for (int i = 0; i < o.warmup; ++i) run();
  std::vector<double> t;
  for (int i = 0; i < std::max(1, o.repeats); ++i) {
    auto a = std::chrono::steady_clock::now();
    run();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

}  // namespace

double time_gemm(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k, const Options& o) {
  const std::int64_t timed = std::min<std::int64_t>(batch, 4);
  std::vector<Eigen::MatrixXf> a(static_cast<std::size_t>(timed), Eigen::MatrixXf::Random(m, k));
  Eigen::MatrixXf b = Eigen::MatrixXf::Random(k, n), c(m, n);
  double s = median_seconds(o, [&] {
    for (auto& x : a) c.noalias() = x * b;
  });
  return s * static_cast<double>(batch) / static_cast<double>(timed);
}

double time_stream(double bytes, const Options& o) {
  const auto n = std::max<Eigen::Index>(1, static_cast<Eigen::Index>(bytes / 12.0));
  Eigen::VectorXf x = Eigen::VectorXf::Random(n), y = Eigen::VectorXf::Random(n);
  return median_seconds(o, [&] { y = 0.5f * x + y; });
}

cost::KernelTable profile_cpu(const std::vector<models::Kernel>& kernels, const Options& o) {
  cost::KernelTable t;
  t.provenance = cpu_provenance();
  t.dtype = "fp32";
  std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>> shapes;
  std::set<double> sizes;
  for (const auto& k : kernels) {
    if (k.kind == models::KernelKind::Memory) sizes.insert(k.bytes);
    else shapes.insert({k.batch, k.m, k.n, k.k});
  }
  for (std::int64_t s = 64; s <= 1024; s *= 2) shapes.insert({1, s, s, s});
  for (double b = 4.0 * 1024; b <= 256.0 * 1024 * 1024; b *= 4) sizes.insert(b);
  for (const auto& [batch, m, n, k] : shapes) t.gemms.push_back({batch, m, n, k, time_gemm(batch, m, n, k, o)});
  for (double b : sizes) t.memory.push_back({b, time_stream(b, o)});
  return t;
}

nlohmann::json cpu_provenance() {
  std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return {{"device", "cpu"},
          {"cpu_model", cpu_model()},
          {"threads", Eigen::nbThreads()},
          {"compiler", std::string("g++ ") + __VERSION__},
          {"eigen", std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) + "." +
                        std::to_string(EIGEN_MINOR_VERSION)},
          {"dtype", "fp32"},
          {"date", date}};
}

}  // namespace dtsim::profile
