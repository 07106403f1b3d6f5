#include "sim/profile/cuda_timing.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace dtsim::profile::cuda {

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string(what) + ": cuBLAS status " + std::to_string(s));
}

struct Event {
  cudaEvent_t e{};
  Event() { check(cudaEventCreate(&e), "cudaEventCreate"); }
  ~Event() { cudaEventDestroy(e); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
};

struct Handle {
  cublasHandle_t h{};
  Handle() { check(cublasCreate(&h), "cublasCreate"); }
  ~Handle() { cublasDestroy(h); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
};

struct Buffer {
  void* p = nullptr;
  explicit Buffer(std::size_t bytes) { check(cudaMalloc(&p, std::max<std::size_t>(bytes, 16)), "cudaMalloc"); }
  ~Buffer() { cudaFree(p); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

// Seconds of each of `repeats` runs of f(), each bracketed by CUDA events on the default stream.
template <class F>
std::vector<double> sample_seconds(int warmup, int repeats, F&& f) {
  for (int i = 0; i < warmup; ++i) f();
  Event start, stop;
  std::vector<double> s;
  for (int i = 0; i < std::max(1, repeats); ++i) {
    check(cudaEventRecord(start.e), "cudaEventRecord");
    f();
    check(cudaEventRecord(stop.e), "cudaEventRecord");
    check(cudaEventSynchronize(stop.e), "cudaEventSynchronize");
    float t = 0;
    check(cudaEventElapsedTime(&t, start.e, stop.e), "cudaEventElapsedTime");
    s.push_back(t * 1e-3);
  }
  return s;
}

double median(std::vector<double> s) {
  std::sort(s.begin(), s.end());
  return s[s.size() / 2];
}

int blocks_for(long long n, int threads) {
  return static_cast<int>(std::min<long long>((n + threads - 1) / threads, 65535));
}

__device__ void store(float* p, float v) { *p = v; }
__device__ void store(__half* p, float v) { *p = __float2half(v); }
__device__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16(v); }

// Values spread over [-1, 1): GPUs draw less power on zeros, and the clocks they then hold would
// make the table faster than a real step.
template <class T>
__global__ void fill_kernel(T* p, long long n) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    store(p + i, static_cast<float>((static_cast<unsigned>(i) * 2654435761u) >> 8) * (2.0f / 16777216.0f) - 1.0f);
}

void fill(void* p, long long n, cudaDataType_t type) {
  const int threads = 256, blocks = blocks_for(n, threads);
  if (type == CUDA_R_16BF) fill_kernel<<<blocks, threads>>>(static_cast<__nv_bfloat16*>(p), n);
  else if (type == CUDA_R_16F) fill_kernel<<<blocks, threads>>>(static_cast<__half*>(p), n);
  else fill_kernel<<<blocks, threads>>>(static_cast<float*>(p), n);
  check(cudaGetLastError(), "fill launch");
}

__global__ void axpy(float a, const float* x, float* y, long long n) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    y[i] = a * x[i] + y[i];
}

}  // namespace

bool probe(DeviceInfo& info, std::string& why) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    why = "no CUDA device is available on this machine";
    if (e == cudaErrorInsufficientDriver)
      why += " (no NVIDIA driver, or one older than CUDA " + std::to_string(CUDART_VERSION / 1000) + "." +
             std::to_string(CUDART_VERSION % 1000 / 10) + ")";
    else if (e != cudaSuccess)
      why += std::string(" (") + cudaGetErrorString(e) + ")";
    return false;
  }
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) {
    why = "cannot read the properties of CUDA device 0";
    return false;
  }
  info.name = p.name;
  info.cc_major = p.major;
  info.cc_minor = p.minor;
  info.sm_count = p.multiProcessorCount;
  cudaDeviceGetAttribute(&info.sm_clock_mhz, cudaDevAttrClockRate, 0);
  cudaDeviceGetAttribute(&info.memory_clock_mhz, cudaDevAttrMemoryClockRate, 0);
  info.sm_clock_mhz /= 1000;  // reported in kHz
  info.memory_clock_mhz /= 1000;
  cudaDriverGetVersion(&info.driver_version);
  cudaRuntimeGetVersion(&info.runtime_version);
  cublasHandle_t h;
  if (cublasCreate(&h) == CUBLAS_STATUS_SUCCESS) {
    cublasGetVersion(h, &info.cublas_version);
    cublasDestroy(h);
  }
  return true;
}

std::vector<double> time_gemm(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k,
                              const std::string& dtype, int warmup, int repeats) {
  if (std::max({batch, m, n, k}) > std::numeric_limits<int>::max() || std::min({batch, m, n, k}) < 1)
    throw std::runtime_error("GEMM shape out of cuBLAS's range");
  cudaDataType_t in = CUDA_R_16BF, out = CUDA_R_16BF;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  std::size_t element = 2;
  if (dtype == "fp16") in = out = CUDA_R_16F;
  if (dtype == "fp32" || dtype == "tf32") {
    in = out = CUDA_R_32F;
    element = 4;
    compute = dtype == "tf32" ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  }
  // Each product of the batch has its own B, as attention's K and V do: a shared one would sit in
  // L2 and read faster than the model's kernel.
  Buffer a(static_cast<std::size_t>(batch * m * k) * element), b(static_cast<std::size_t>(batch * k * n) * element),
      c(static_cast<std::size_t>(batch * m * n) * element);
  fill(a.p, batch * m * k, in);
  fill(b.p, batch * k * n, in);
  Handle h;
  const float one = 1.0f, zero = 0.0f;
  // Column-major C^T[n,m] = B^T[n,k] A^T[k,m].
  return sample_seconds(warmup, repeats, [&] {
    check(cublasGemmStridedBatchedEx(h.h, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                                     static_cast<int>(k), &one, b.p, in, static_cast<int>(n), k * n, a.p, in,
                                     static_cast<int>(k), k * m, &zero, c.p, out, static_cast<int>(n), n * m,
                                     static_cast<int>(batch), compute, CUBLAS_GEMM_DEFAULT),
          "cublasGemmStridedBatchedEx");
  });
}

std::vector<double> time_stream(double bytes, int warmup, int repeats) {
  const long long n = std::max(1LL, static_cast<long long>(bytes / 12.0));
  Buffer x(static_cast<std::size_t>(n) * 4), y(static_cast<std::size_t>(n) * 4);
  fill(x.p, n, CUDA_R_32F);
  fill(y.p, n, CUDA_R_32F);
  const int threads = 256, blocks = blocks_for(n, threads);
  return sample_seconds(warmup, repeats, [&] {
    axpy<<<blocks, threads>>>(0.5f, static_cast<const float*>(x.p), static_cast<float*>(y.p), n);
    check(cudaGetLastError(), "axpy launch");
  });
}

__global__ void empty_kernel() {}

double time_launch(int warmup, int repeats) {
  constexpr int launches = 1000;
  for (int i = 0; i < std::max(1, warmup); ++i) empty_kernel<<<1, 1>>>();
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  std::vector<double> s;
  for (int r = 0; r < std::max(1, repeats); ++r) {
    const auto a = std::chrono::steady_clock::now();
    for (int i = 0; i < launches; ++i) empty_kernel<<<1, 1>>>();
    check(cudaGetLastError(), "empty kernel launch");
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count() / launches);
  }
  std::sort(s.begin(), s.end());
  return s[s.size() / 2];
}

}  // namespace dtsim::profile::cuda

// The plugin's face: C functions dtsim finds with dlsym, so no C++ exception or CUDA type crosses
// the library boundary. Each returns a negative value and fills `error` on failure.
namespace {
void copy_message(const char* what, char* error, int size) {
  if (size <= 0) return;
  std::snprintf(error, static_cast<std::size_t>(size), "%s", what);
}
}  // namespace

#define DTSIM_EXPORT __attribute__((visibility("default")))

extern "C" {

DTSIM_EXPORT int dtsim_cuda_probe(char* name, int name_size, int* ints, char* error, int error_size) {
  dtsim::profile::cuda::DeviceInfo info;
  std::string why;
  if (!dtsim::profile::cuda::probe(info, why)) {
    copy_message(why.c_str(), error, error_size);
    return -1;
  }
  copy_message(info.name.c_str(), name, name_size);
  const int values[] = {info.cc_major,     info.cc_minor,     info.driver_version, info.runtime_version,
                        info.cublas_version, info.sm_clock_mhz, info.memory_clock_mhz, info.sm_count};
  for (int i = 0; i < 8; ++i) ints[i] = values[i];
  return 0;
}

// Medians (dtsim builds before the samples were exported call these).
DTSIM_EXPORT double dtsim_cuda_time_gemm(long long batch, long long m, long long n, long long k, const char* dtype,
                                         int warmup, int repeats, char* error, int error_size) {
  try {
    return dtsim::profile::cuda::median(dtsim::profile::cuda::time_gemm(batch, m, n, k, dtype, warmup, repeats));
  } catch (const std::exception& e) {
    copy_message(e.what(), error, error_size);
    return -1;
  }
}

DTSIM_EXPORT double dtsim_cuda_time_stream(double bytes, int warmup, int repeats, char* error, int error_size) {
  try {
    return dtsim::profile::cuda::median(dtsim::profile::cuda::time_stream(bytes, warmup, repeats));
  } catch (const std::exception& e) {
    copy_message(e.what(), error, error_size);
    return -1;
  }
}

// Every sample, into `seconds` (room for `capacity`): the number written, or -1 on failure.
DTSIM_EXPORT int dtsim_cuda_gemm_samples(long long batch, long long m, long long n, long long k, const char* dtype,
                                         int warmup, int repeats, double* seconds, int capacity, char* error,
                                         int error_size) {
  try {
    const auto s = dtsim::profile::cuda::time_gemm(batch, m, n, k, dtype, warmup, std::min(repeats, capacity));
    std::copy(s.begin(), s.end(), seconds);
    return static_cast<int>(s.size());
  } catch (const std::exception& e) {
    copy_message(e.what(), error, error_size);
    return -1;
  }
}

DTSIM_EXPORT int dtsim_cuda_stream_samples(double bytes, int warmup, int repeats, double* seconds, int capacity,
                                           char* error, int error_size) {
  try {
    const auto s = dtsim::profile::cuda::time_stream(bytes, warmup, std::min(repeats, capacity));
    std::copy(s.begin(), s.end(), seconds);
    return static_cast<int>(s.size());
  } catch (const std::exception& e) {
    copy_message(e.what(), error, error_size);
    return -1;
  }
}

DTSIM_EXPORT double dtsim_cuda_time_launch(int warmup, int repeats, char* error, int error_size) {
  try {
    return dtsim::profile::cuda::time_launch(warmup, repeats);
  } catch (const std::exception& e) {
    copy_message(e.what(), error, error_size);
    return -1;
  }
}

}  // extern "C"
