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

namespace {

using I = std::int64_t;

// The columns of group `g`: one row per output position of every image (N*P*Q), one column per
// input channel of the group and filter tap (C/g*R*S); zero where the window overhangs.
void im2col(const float* x, const models::ConvShape& c, I g, Eigen::MatrixXf& col) {
  const I cg = c.c / c.groups, p = c.p(), q = c.q();
  col.resize(c.n * p * q, cg * c.r * c.s);
  for (I n = 0; n < c.n; ++n)
    for (I ch = 0; ch < cg; ++ch) {
      const float* plane = x + ((n * c.c) + g * cg + ch) * c.h * c.w;
      for (I r = 0; r < c.r; ++r)
        for (I s = 0; s < c.s; ++s) {
          const I column = (ch * c.r + r) * c.s + s;
          for (I i = 0; i < p; ++i) {
            const I y = i * c.stride_h - c.pad_h + r;
            for (I j = 0; j < q; ++j) {
              const I xx = j * c.stride_w - c.pad_w + s;
              const bool inside = y >= 0 && y < c.h && xx >= 0 && xx < c.w;
              col((n * p + i) * q + j, column) = inside ? plane[y * c.w + xx] : 0.0f;
            }
          }
        }
    }
}

// The adjoint of im2col: adds each column entry back into the input gradient of group `g`.
void col2im(const Eigen::MatrixXf& col, const models::ConvShape& c, I g, float* dx) {
  const I cg = c.c / c.groups, p = c.p(), q = c.q();
  for (I n = 0; n < c.n; ++n)
    for (I ch = 0; ch < cg; ++ch) {
      float* plane = dx + ((n * c.c) + g * cg + ch) * c.h * c.w;
      for (I r = 0; r < c.r; ++r)
        for (I s = 0; s < c.s; ++s) {
          const I column = (ch * c.r + r) * c.s + s;
          for (I i = 0; i < p; ++i) {
            const I y = i * c.stride_h - c.pad_h + r;
            if (y < 0 || y >= c.h) continue;
            for (I j = 0; j < q; ++j) {
              const I xx = j * c.stride_w - c.pad_w + s;
              if (xx >= 0 && xx < c.w) plane[y * c.w + xx] += col((n * p + i) * q + j, column);
            }
          }
        }
    }
}

}  // namespace

std::vector<float> conv2d(const std::vector<float>& x, const std::vector<float>& w, const models::ConvShape& c) {
  const I cg = c.c / c.groups, kg = c.k / c.groups, p = c.p(), q = c.q(), taps = cg * c.r * c.s;
  std::vector<float> y(static_cast<std::size_t>(c.n * c.k * p * q));
  Eigen::MatrixXf col;
  for (I g = 0; g < c.groups; ++g) {
    im2col(x.data(), c, g, col);
    // Filters of the group as a (C/g*R*S) x (K/g) matrix.
    Eigen::MatrixXf f(taps, kg);
    for (I k = 0; k < kg; ++k)
      for (I t = 0; t < taps; ++t) f(t, k) = w[static_cast<std::size_t>((g * kg + k) * taps + t)];
    const Eigen::MatrixXf out = col * f;
    for (I n = 0; n < c.n; ++n)
      for (I k = 0; k < kg; ++k)
        for (I pq = 0; pq < p * q; ++pq) y[static_cast<std::size_t>(((n * c.k) + g * kg + k) * p * q + pq)] = out(n * p * q + pq, k);
  }
  return y;
}

double time_conv(const models::ConvShape& c, models::ConvPass pass, const Options& o) {
  const I cg = c.c / c.groups, kg = c.k / c.groups, npq = c.n * c.p() * c.q(), taps = cg * c.r * c.s;
  const I timed = std::min<I>(c.groups, 4);
  std::vector<float> x(static_cast<std::size_t>(c.n * c.c * c.h * c.w), 0.5f), dx(x.size());
  const Eigen::MatrixXf f = Eigen::MatrixXf::Random(taps, kg), dy = Eigen::MatrixXf::Random(npq, kg);
  Eigen::MatrixXf col, out;
  const double s = median_seconds(o, [&] {
    for (I g = 0; g < timed; ++g) {
      switch (pass) {
        case models::ConvPass::Forward:
          im2col(x.data(), c, g, col);
          out.noalias() = col * f;
          break;
        case models::ConvPass::Dgrad:
          col.noalias() = dy * f.transpose();
          col2im(col, c, g, dx.data());
          break;
        case models::ConvPass::Wgrad:
          im2col(x.data(), c, g, col);
          out.noalias() = col.transpose() * dy;
          break;
      }
    }
  });
  return s * static_cast<double>(c.groups) / static_cast<double>(timed);
}

cost::KernelTable profile_cpu(const std::vector<models::Kernel>& kernels, const Options& o) {
  cost::KernelTable t;
  t.provenance = cpu_provenance();
  t.dtype = "fp32";
  std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>> shapes;
  std::set<double> sizes;
  std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>> timed_convs;
  for (const auto& k : kernels) {
    if (k.kind == models::KernelKind::Memory) {
      sizes.insert(k.bytes);
    } else if (k.kind == models::KernelKind::Conv) {
      if (timed_convs.insert({k.batch, k.m, k.n, k.k}).second) t.convs.push_back({k.batch, k.m, k.n, k.k, time_conv(k.conv, k.pass, o)});
    } else {
      shapes.insert({k.batch, k.m, k.n, k.k});
    }
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
