#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <fmt/format.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "sim/cost/roofline.hpp"
#include "sim/profile/cpu_profiler.hpp"

using namespace dtsim;

namespace {

// A real fp32 training step of an MLP with Eigen on this CPU, and the same step as kernels.
struct Mlp {
  std::int64_t batch;
  std::vector<std::int64_t> dims;  // input, hidden..., output
  std::vector<Eigen::MatrixXf> w, dw;
  Eigen::MatrixXf x, y;

  Mlp(std::int64_t b, std::vector<std::int64_t> d) : batch(b), dims(std::move(d)) {
    for (std::size_t i = 0; i + 1 < dims.size(); ++i) {
      w.push_back(Eigen::MatrixXf::Random(dims[i], dims[i + 1]) * 0.01f);
      dw.push_back(Eigen::MatrixXf::Zero(dims[i], dims[i + 1]));
    }
    x = Eigen::MatrixXf::Random(batch, dims.front());
    y = Eigen::MatrixXf::Random(batch, dims.back());
  }

  void step() {
    std::vector<Eigen::MatrixXf> act{x};
    for (std::size_t i = 0; i < w.size(); ++i) {
      Eigen::MatrixXf h = act.back() * w[i];
      if (i + 1 < w.size()) h = h.cwiseMax(0.0f);
      act.push_back(std::move(h));
    }
    Eigen::MatrixXf grad = act.back() - y;  // squared-error loss gradient
    for (std::size_t i = w.size(); i-- > 0;) {
      dw[i].noalias() = act[i].transpose() * grad;
      if (i > 0) {
        Eigen::MatrixXf g = grad * w[i].transpose();
        grad = (act[i].array() > 0.0f).select(g, 0.0f);
      }
    }
    for (std::size_t i = 0; i < w.size(); ++i) w[i] -= 1e-4f * dw[i];
  }

  std::vector<models::Kernel> kernels() const {
    auto gemm = [](std::int64_t m, std::int64_t n, std::int64_t k) {
      return models::Kernel{"gemm", models::KernelKind::Gemm, 1, m, n, k, 2.0 * m * n * k, 4.0 * (m * k + k * n + m * n)};
    };
    auto mem = [](double bytes) { return models::Kernel{"elementwise", models::KernelKind::Memory, 1, 0, 0, 0, 0, bytes}; };
    std::vector<models::Kernel> out;
    for (std::size_t i = 0; i + 1 < dims.size(); ++i) {
      out.push_back(gemm(batch, dims[i + 1], dims[i]));
      if (i + 2 < dims.size()) out.push_back(mem(8.0 * batch * dims[i + 1]));  // relu
    }
    out.push_back(mem(12.0 * batch * dims.back()));  // loss gradient
    for (std::size_t i = dims.size() - 1; i-- > 0;) {
      out.push_back(gemm(dims[i], dims[i + 1], batch));  // weight gradient
      if (i > 0) {
        out.push_back(gemm(batch, dims[i], dims[i + 1]));  // input gradient
        out.push_back(mem(12.0 * batch * dims[i]));        // relu mask
      }
    }
    for (std::size_t i = 0; i + 1 < dims.size(); ++i) out.push_back(mem(12.0 * dims[i] * dims[i + 1]));  // SGD
    return out;
  }
};

// CPU time other processes used on the CPUs this process may run on, from /proc/stat (user,
// nice, system, irq, softirq and steal ticks), and this process's own CPU time.
struct CpuClock {
  double machine_busy_s = 0, own_s = 0, wall_s = 0;

  static CpuClock now() {
    CpuClock c;
    cpu_set_t mine;
    CPU_ZERO(&mine);
    const bool known = sched_getaffinity(0, sizeof mine, &mine) == 0;
    std::ifstream stat("/proc/stat");
    const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
    for (std::string line; std::getline(stat, line);) {
      if (line.rfind("cpu", 0) != 0 || line.size() < 4 || !std::isdigit(static_cast<unsigned char>(line[3]))) continue;
      std::istringstream in(line.substr(3));
      int cpu = 0;
      double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
      in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
      if (known && !CPU_ISSET(cpu, &mine)) continue;
      c.machine_busy_s += (user + nice + system + irq + softirq + steal) / tick;
    }
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    c.own_s = static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
    c.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    return c;
  }
  static int cpus() {
    cpu_set_t mine;
    CPU_ZERO(&mine);
    return sched_getaffinity(0, sizeof mine, &mine) == 0 ? CPU_COUNT(&mine) : static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  }
};

// Of the CPUs' capacity between `a` and `b`, the share that other processes (or the hypervisor,
// as steal) took.
double others_share(const CpuClock& a, const CpuClock& b) {
  const double capacity = (b.wall_s - a.wall_s) * CpuClock::cpus();
  const double others = (b.machine_busy_s - a.machine_busy_s) - (b.own_s - a.own_s);
  return capacity > 0 ? std::max(0.0, others) / capacity : 0.0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Standard deviation over mean.
double spread(const std::vector<double>& v) {
  double mean = 0, var = 0;
  for (double x : v) mean += x / static_cast<double>(v.size());
  for (double x : v) var += (x - mean) * (x - mean) / static_cast<double>(v.size());
  return mean > 0 ? std::sqrt(var) / mean : 0.0;
}

double seconds_of(const std::function<void()>& f) {
  auto a = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
}

}  // namespace

// The element-wise kind a table times this kernel as; plain streams are "stream".
std::string kind_of(const models::Kernel& k) {
  const std::string kind = cost::elementwise_kind(k);
  return kind.empty() ? "stream" : kind;
}

TEST(CpuProfile, PredictsARealMlpTrainingStep) {
  // Two timings are compared, so they are only trusted when nothing else ran beside them: other
  // processes took at most 10% of this process's CPUs while they were taken, and repeats agree
  // to 10% (coefficient of variation). Otherwise the test skips and says why: a busy machine is
  // no evidence against the prediction.
  constexpr double kQuiet = 0.10, kSteady = 0.10;
  const double load = [] {
    std::ifstream in("/proc/loadavg");
    double one = 0;
    in >> one;
    return one;
  }();
  Mlp mlp(512, {1024, 2048, 2048, 256});
  auto kernels = mlp.kernels();
  profile::Options o;
  o.repeats = 7;
  cost::DeviceProfile d;
  d.name = "this-cpu";
  d.peak_flops = {{"fp32", 1e11}};
  d.hbm_bandwidth = 5e10;
  const CpuClock c0 = CpuClock::now();
  d.kernels = profile::profile_cpu(kernels, o);
  const CpuClock c1 = CpuClock::now();
  double predicted = 0, measured_share = 0;
  for (const auto& k : kernels) {
    auto [s, source] = cost::price_kernel(d, k, "fp32");
    predicted += s;
    if (source == cost::PriceSource::Exact) measured_share += s;
  }
  EXPECT_DOUBLE_EQ(measured_share, predicted);  // every kernel of the step was timed
  if (const double busy = others_share(c0, c1); busy > kQuiet)  // no use timing the real step
    GTEST_SKIP() << fmt::format("machine busy, timings not comparable: other processes took {:.0f}% of {} CPUs while kernels "
                                "were profiled (1-minute load {:.2f})",
                                100 * busy, CpuClock::cpus(), load);

  // The real step, alternating with the step's kernels timed once more each (after one warm-up
  // run), so both see the same machine.
  mlp.step();
  std::vector<double> real, again;
  const profile::Options once{1, 1};
  for (int round = 0; round < 5; ++round) {
    real.push_back(seconds_of([&] { mlp.step(); }));
    double sum = 0;
    for (const auto& k : kernels)
      sum += k.kind == models::KernelKind::Memory ? profile::time_elementwise(kind_of(k), k.bytes, once).median
                                              : profile::time_gemm(k.batch, k.m, k.n, k.k, once).median;
    again.push_back(sum);
  }
  const CpuClock c2 = CpuClock::now();
  const double step = median(real), kernels_now = median(again);
  const double busy_profile = others_share(c0, c1), busy_step = others_share(c1, c2);
  const std::string conditions = fmt::format(
      "other processes took {:.0f}% of {} CPUs while kernels were profiled, {:.0f}% during the real steps (1-minute load "
      "{:.2f}); spread of real steps {:.1f}%, of the kernels {:.1f}%; kernels now {:+.1f}% against their profile",
      100 * busy_profile, CpuClock::cpus(), 100 * busy_step, load, 100 * spread(real), 100 * spread(again),
      100 * (kernels_now / predicted - 1));
  RecordProperty("predicted_s", std::to_string(predicted));
  RecordProperty("real_s", std::to_string(step));
  RecordProperty("conditions", conditions);
  std::cout << "predicted " << predicted << " s, real " << step << " s, error " << 100 * (predicted / step - 1) << " %\n"
            << conditions << "\n";
  if (busy_profile > kQuiet || busy_step > kQuiet) GTEST_SKIP() << "machine busy, timings not comparable: " << conditions;
  if (spread(real) > kSteady || spread(again) > kSteady) GTEST_SKIP() << "timings unsteady: " << conditions;
  // The machine's speed moved between profiling and the real step (this machine drifts).
  if (std::abs(kernels_now / predicted - 1) > kSteady) GTEST_SKIP() << "CPU speed changed since profiling: " << conditions;
  // 25 %: the real step allocates temporaries, transposes operands and runs kernels back to back
  // through shared caches, none of which isolated kernel timings see.
  EXPECT_NEAR(predicted / step, 1.0, 0.25) << conditions;
}
