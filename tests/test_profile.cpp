#include <gtest/gtest.h>

#include <Eigen/Dense>
#include <algorithm>
#include <chrono>

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

double median_step_seconds(Mlp& m, int repeats) {
  m.step();
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    auto a = std::chrono::steady_clock::now();
    m.step();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

TEST(CpuProfile, PredictsARealMlpTrainingStep) {
  Mlp mlp(512, {1024, 2048, 2048, 256});
  auto kernels = mlp.kernels();
  profile::Options o;
  o.repeats = 7;
  cost::DeviceProfile d;
  d.name = "this-cpu";
  d.peak_flops = {{"fp32", 1e11}};
  d.hbm_bandwidth = 5e10;
  d.kernels = profile::profile_cpu(kernels, o);
  double predicted = 0, measured_share = 0;
  for (const auto& k : kernels) {
    auto [s, source] = cost::price_kernel(d, k, "fp32");
    predicted += s;
    if (source == cost::PriceSource::Exact) measured_share += s;
  }
  EXPECT_DOUBLE_EQ(measured_share, predicted);  // every kernel of the step was timed
  const double real = median_step_seconds(mlp, 7);
  RecordProperty("predicted_s", std::to_string(predicted));
  RecordProperty("real_s", std::to_string(real));
  std::cout << "predicted " << predicted << " s, real " << real << " s, error " << 100 * (predicted / real - 1) << " %\n";
  // 25 %: the real step allocates temporaries, transposes operands and runs kernels back to back
  // through shared caches, none of which isolated kernel timings see; and this machine's speed
  // drifts between the two measurements.
  EXPECT_NEAR(predicted / real, 1.0, 0.25);
}
