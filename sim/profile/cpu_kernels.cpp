// libdtsim_cpu.so: the kernels `dtsim profile --device cpu` times, compiled for this machine's
// ISA. Everything here but the C interface is hidden, so its Eigen code never resolves to
// dtsim's portable copy, nor dtsim's to it.
#include "sim/profile/cpu_kernels.hpp"

#include <omp.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#define DTSIM_EXPORT __attribute__((visibility("default")))

extern "C" {
DTSIM_EXPORT extern const char dtsim_cpu_isa[] =
#if defined(__AVX512F__)
    "avx512f+avx2+fma";
#elif defined(__AVX2__) && defined(__FMA__)
    "avx2+fma";
#elif defined(__AVX__)
    "avx";
#elif defined(__SSE4_2__)
    "sse4.2";
#else
    "sse2";
#endif
DTSIM_EXPORT extern const int dtsim_cpu_abi = DTSIM_CPU_ABI;
}

namespace {

using Array = Eigen::Array<float, Eigen::Dynamic, Eigen::Dynamic>;

void copy_out(char* dst, int n, const std::string& s) {
  if (n > 0) std::snprintf(dst, static_cast<std::size_t>(n), "%s", s.c_str());
}

struct Kernel {
  virtual ~Kernel() = default;
  virtual void run() = 0;
};

// C[m,n] = A[m,k] B[k,n] for each of `batch` A's (Eigen spreads one product over its threads).
struct Gemm : Kernel {
  std::vector<Eigen::MatrixXf> a;
  Eigen::MatrixXf b, c;
  Gemm(long long batch, long long m, long long n, long long k)
      : a(static_cast<std::size_t>(batch), Eigen::MatrixXf::Random(m, k)), b(Eigen::MatrixXf::Random(k, n)), c(m, n) {}
  void run() override {
    for (auto& x : a) c.noalias() = x * b;
  }
};

// Element-wise kernels as an Eigen trainer writes them (one thread, vectorised); `columns`
// values per row for the kernels that reduce along a row.
struct Elementwise : Kernel {
  Array x, y;
  Elementwise(double bytes, double bytes_per_element, Eigen::Index columns) {
    const auto n = std::max<Eigen::Index>(1, static_cast<Eigen::Index>(bytes / bytes_per_element));
    const Eigen::Index rows = std::min(columns, n);
    x = Array::Random(rows, std::max<Eigen::Index>(1, n / rows));
    y = Array::Zero(x.rows(), x.cols());
  }
};

struct Stream : Elementwise {  // 12 bytes per element: read x and y, write y
  explicit Stream(double bytes) : Elementwise(bytes, 12.0, 1 << 20) {}
  void run() override { y = 0.5f * x + y; }
};

struct Gelu : Elementwise {  // tanh approximation (Hendrycks and Gimpel 2016), as GPT-2 uses
  explicit Gelu(double bytes) : Elementwise(bytes, 8.0, 1 << 20) {}
  void run() override { y = 0.5f * x * (1.0f + (0.7978845608f * (x + 0.044715f * x.cube())).tanh()); }
};

struct Softmax : Elementwise {  // along rows of 1,024 (an attention row, a vocabulary slice)
  explicit Softmax(double bytes) : Elementwise(bytes, 8.0, 1024) {}
  void run() override {
    y = (x.rowwise() - x.colwise().maxCoeff()).exp();
    y.rowwise() /= y.colwise().sum();
  }
};

struct LayerNorm : Elementwise {  // over rows of 1,024 hidden values, with a scale and a shift
  Eigen::ArrayXf gamma, beta;
  explicit LayerNorm(double bytes) : Elementwise(bytes, 8.0, 1024) {
    gamma = Eigen::ArrayXf::Random(x.rows());
    beta = Eigen::ArrayXf::Random(x.rows());
  }
  void run() override {
    y = x.rowwise() - x.colwise().mean();
    const Eigen::Array<float, 1, Eigen::Dynamic> inv = ((y.square().colwise().mean()) + 1e-5f).rsqrt();
    y.rowwise() *= inv;
    y = (y.colwise() * gamma).colwise() + beta;
  }
};

// Dropout: a counter-based random number per element (splitmix64, as Philox is in frameworks:
// no state carried between elements), keep with probability 0.9, scale the kept ones.
struct Dropout : Elementwise {
  std::uint64_t seed = 0x9e3779b97f4a7c15ULL;
  explicit Dropout(double bytes) : Elementwise(bytes, 8.0, 1 << 20) {}
  void run() override {
    const float* in = x.data();
    float* out = y.data();
    const std::uint64_t s = seed++;
    const Eigen::Index n = x.size();
    for (Eigen::Index i = 0; i < n; ++i) {
      std::uint64_t z = s + static_cast<std::uint64_t>(i) * 0x9e3779b97f4a7c15ULL;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      z ^= z >> 31;
      out[i] = (z >> 40) < static_cast<std::uint64_t>(0.9 * (1 << 24)) ? in[i] * (1.0f / 0.9f) : 0.0f;
    }
  }
};

// What a framework adds around every kernel it runs: find the op by name in a registry, allocate
// its output, call it, free the output. On the calling thread: a kernel that spreads over the
// threads pays the fork and join inside its own timing (GEMMs here), so it is not counted twice.
struct Launch : Kernel {
  std::unordered_map<std::string, std::function<void(float*, int)>> registry;
  volatile float sink = 0;
  Launch() {
    registry["noop"] = [](float* out, int n) { out[n - 1] = static_cast<float>(n); };
    registry["other"] = [](float* out, int n) { out[0] = static_cast<float>(n); };
  }
  void run() override {
    const auto& op = registry.at("noop");
    auto out = std::make_unique<float[]>(64);
    op(out.get(), 64);
    sink = out[63];
  }
};

// An OpenMP fork and join over the threads with nothing to do: what a parallel kernel pays
// before its work, recorded in the provenance (it is inside those kernels' times).
struct ForkJoin : Kernel {
  std::vector<float> out;
  ForkJoin() : out(static_cast<std::size_t>(Eigen::nbThreads()) * 16) {}
  void run() override {
#pragma omp parallel num_threads(Eigen::nbThreads())
    out[static_cast<std::size_t>(omp_get_thread_num()) * 16] += 1.0f;
  }
};

// A 2-D convolution's geometry, as models::ConvShape (which this plain-C plugin does not include).
struct ConvShape {
  long long n, c, h, w, k, r, s, stride_h, stride_w, pad_h, pad_w, groups;
  long long p() const { return (h + 2 * pad_h - r) / stride_h + 1; }
  long long q() const { return (w + 2 * pad_w - s) / stride_w + 1; }
};

ConvShape conv_shape(const long long* v) {
  const ConvShape c{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11]};
  if (c.n < 1 || c.c < 1 || c.h < 1 || c.w < 1 || c.k < 1 || c.r < 1 || c.s < 1 || c.stride_h < 1 || c.stride_w < 1 ||
      c.pad_h < 0 || c.pad_w < 0 || c.groups < 1 || c.c % c.groups != 0 || c.k % c.groups != 0 || c.p() < 1 || c.q() < 1)
    throw std::invalid_argument("not a valid convolution shape");
  return c;
}

using I = long long;

// The columns of group `g`: one row per output position of every image (N*P*Q), one column per
// input channel of the group and filter tap (C/g*R*S); zero where the window overhangs.
void im2col(const float* x, const ConvShape& c, I g, Eigen::MatrixXf& col) {
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
void col2im(const Eigen::MatrixXf& col, const ConvShape& c, I g, float* dx) {
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

// One convolution pass over `groups` groups as the im2col formulation runs it: forward gathers
// the input into columns and multiplies by the filters, dgrad multiplies the output gradient by
// the filters and scatters the columns back (col2im), wgrad gathers the input and multiplies by
// the output gradient.
struct Conv : Kernel {
  enum class Pass { Forward, Dgrad, Wgrad } pass;
  ConvShape c;
  I groups;
  std::vector<float> x, dx;
  Eigen::MatrixXf f, dy, col, out;
  Conv(Pass pass_, const ConvShape& shape, I groups_) : pass(pass_), c(shape), groups(groups_) {
    const I kg = c.k / c.groups, npq = c.n * c.p() * c.q(), taps = c.c / c.groups * c.r * c.s;
    x.assign(static_cast<std::size_t>(c.n * c.c * c.h * c.w), 0.5f);
    dx.assign(x.size(), 0.0f);
    f = Eigen::MatrixXf::Random(taps, kg);
    dy = Eigen::MatrixXf::Random(npq, kg);
  }
  void run() override {
    for (I g = 0; g < groups; ++g) switch (pass) {
        case Pass::Forward:
          im2col(x.data(), c, g, col);
          out.noalias() = col * f;
          break;
        case Pass::Dgrad:
          col.noalias() = dy * f.transpose();
          col2im(col, c, g, dx.data());
          break;
        case Pass::Wgrad:
          im2col(x.data(), c, g, col);
          out.noalias() = col.transpose() * dy;
          break;
      }
  }
};

}  // namespace

extern "C" {

DTSIM_EXPORT int dtsim_cpu_describe(char* eigen, int eigen_n, char* compiler, int compiler_n, char* simd, int simd_n,
                                    int* threads) {
  copy_out(eigen, eigen_n, std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) + "." +
                               std::to_string(EIGEN_MINOR_VERSION));
  copy_out(compiler, compiler_n, std::string("g++ ") + __VERSION__);
  copy_out(simd, simd_n, Eigen::SimdInstructionSetsInUse());
  *threads = Eigen::nbThreads();
  return 0;
}

DTSIM_EXPORT void* dtsim_cpu_kernel_new(const char* kind, long long batch, long long m, long long n, long long k,
                                        double bytes, char* error, int error_n) {
  const std::string kd = kind ? kind : "";
  try {
    if (kd == "gemm") {
      if (batch < 1 || m < 1 || n < 1 || k < 1) throw std::invalid_argument("a GEMM needs positive sizes");
      return new Gemm(batch, m, n, k);
    }
    if (kd == "launch") return new Launch();
    if (kd == "fork_join") return new ForkJoin();
    if (!(bytes > 0)) throw std::invalid_argument("an element-wise kernel needs a positive size");
    if (kd == "stream") return new Stream(bytes);
    if (kd == "gelu") return new Gelu(bytes);
    if (kd == "softmax") return new Softmax(bytes);
    if (kd == "layernorm") return new LayerNorm(bytes);
    if (kd == "dropout") return new Dropout(bytes);
    throw std::invalid_argument("unknown kernel kind \"" + kd + "\"");
  } catch (const std::exception& e) {
    copy_out(error, error_n, e.what());
  }
  return nullptr;
}

DTSIM_EXPORT void dtsim_cpu_kernel_run(void* kernel, long long times) {
  auto* k = static_cast<Kernel*>(kernel);
  for (long long i = 0; i < times; ++i) k->run();
}

DTSIM_EXPORT void dtsim_cpu_kernel_free(void* kernel) { delete static_cast<Kernel*>(kernel); }

DTSIM_EXPORT void* dtsim_cpu_conv_new(const char* pass, const long long* shape, long long groups, char* error,
                                      int error_n) {
  const std::string p = pass ? pass : "";
  try {
    if (!shape) throw std::invalid_argument("no convolution shape");
    const ConvShape c = conv_shape(shape);
    if (groups < 1 || groups > c.groups) throw std::invalid_argument("groups outside 1 to the shape's groups");
    if (p == "conv_fwd") return new Conv(Conv::Pass::Forward, c, groups);
    if (p == "conv_dgrad") return new Conv(Conv::Pass::Dgrad, c, groups);
    if (p == "conv_wgrad") return new Conv(Conv::Pass::Wgrad, c, groups);
    throw std::invalid_argument("unknown convolution pass \"" + p + "\"");
  } catch (const std::exception& e) {
    copy_out(error, error_n, e.what());
  }
  return nullptr;
}

DTSIM_EXPORT int dtsim_cpu_conv2d(const float* x, const float* w, const long long* shape, float* y, char* error,
                                  int error_n) {
  try {
    if (!x || !w || !shape || !y) throw std::invalid_argument("null argument");
    const ConvShape c = conv_shape(shape);
    const I cg = c.c / c.groups, kg = c.k / c.groups, p = c.p(), q = c.q(), taps = cg * c.r * c.s;
    Eigen::MatrixXf col;
    for (I g = 0; g < c.groups; ++g) {
      im2col(x, c, g, col);
      // Filters of the group as a (C/g*R*S) x (K/g) matrix.
      Eigen::MatrixXf f(taps, kg);
      for (I k = 0; k < kg; ++k)
        for (I t = 0; t < taps; ++t) f(t, k) = w[(g * kg + k) * taps + t];
      const Eigen::MatrixXf out = col * f;
      for (I n = 0; n < c.n; ++n)
        for (I k = 0; k < kg; ++k)
          for (I pq = 0; pq < p * q; ++pq) y[((n * c.k) + g * kg + k) * p * q + pq] = out(n * p * q + pq, k);
    }
    return 0;
  } catch (const std::exception& e) {
    copy_out(error, error_n, e.what());
  }
  return 1;
}
}
