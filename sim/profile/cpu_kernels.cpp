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
}
