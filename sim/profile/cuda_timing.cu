#include "sim/profile/cuda_timing.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
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

// Median of `repeats` timings of f(), each bracketed by CUDA events on the default stream.
template <class F>
double median_seconds(int warmup, int repeats, F&& f) {
  for (int i = 0; i < warmup; ++i) f();
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<float> ms;
  for (int i = 0; i < std::max(1, repeats); ++i) {
    check(cudaEventRecord(start), "cudaEventRecord");
    f();
    check(cudaEventRecord(stop), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float t = 0;
    check(cudaEventElapsedTime(&t, start, stop), "cudaEventElapsedTime");
    ms.push_back(t);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2] * 1e-3;
}

__global__ void axpy(float a, const float* x, float* y, long long n) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    y[i] = a * x[i] + y[i];
}

struct Buffer {
  void* p = nullptr;
  explicit Buffer(std::size_t bytes) { check(cudaMalloc(&p, std::max<std::size_t>(bytes, 16)), "cudaMalloc"); }
  ~Buffer() { cudaFree(p); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

}  // namespace

bool probe(DeviceInfo& info, std::string& why) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    why = "no CUDA device is available on this machine";
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

double time_gemm(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k, const std::string& dtype,
                 int warmup, int repeats) {
  cudaDataType_t in = CUDA_R_16BF, out = CUDA_R_16BF;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  std::size_t element = 2;
  if (dtype == "fp16") in = out = CUDA_R_16F;
  if (dtype == "fp32" || dtype == "tf32") {
    in = out = CUDA_R_32F;
    element = 4;
    compute = dtype == "tf32" ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  }
  Buffer a(static_cast<std::size_t>(batch * m * k) * element), b(static_cast<std::size_t>(k * n) * element),
      c(static_cast<std::size_t>(batch * m * n) * element);
  cublasHandle_t h;
  check(cublasCreate(&h), "cublasCreate");
  const float one = 1.0f, zero = 0.0f;
  // Column-major C^T[n,m] = B^T[n,k] A^T[k,m]; B is shared by the batch (stride 0).
  auto run = [&] {
    check(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                                     static_cast<int>(k), &one, b.p, in, static_cast<int>(n), 0, a.p, in,
                                     static_cast<int>(k), k * m, &zero, c.p, out, static_cast<int>(n), n * m,
                                     static_cast<int>(batch), compute, CUBLAS_GEMM_DEFAULT),
          "cublasGemmStridedBatchedEx");
  };
  double s = 0;
  try {
    s = median_seconds(warmup, repeats, run);
  } catch (...) {
    cublasDestroy(h);
    throw;
  }
  cublasDestroy(h);
  return s;
}

double time_stream(double bytes, int warmup, int repeats) {
  const long long n = std::max(1LL, static_cast<long long>(bytes / 12.0));
  Buffer x(static_cast<std::size_t>(n) * 4), y(static_cast<std::size_t>(n) * 4);
  check(cudaMemset(x.p, 0, static_cast<std::size_t>(n) * 4), "cudaMemset");
  check(cudaMemset(y.p, 0, static_cast<std::size_t>(n) * 4), "cudaMemset");
  const int threads = 256;
  const int blocks = static_cast<int>(std::min<long long>((n + threads - 1) / threads, 65535));
  return median_seconds(warmup, repeats, [&] {
    axpy<<<blocks, threads>>>(0.5f, static_cast<const float*>(x.p), static_cast<float*>(y.p), n);
    check(cudaGetLastError(), "axpy launch");
  });
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

extern "C" {

int dtsim_cuda_probe(char* name, int name_size, int* ints, char* error, int error_size) {
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

double dtsim_cuda_time_gemm(long long batch, long long m, long long n, long long k, const char* dtype, int warmup,
                            int repeats, char* error, int error_size) {
  try {
    return dtsim::profile::cuda::time_gemm(batch, m, n, k, dtype, warmup, repeats);
  } catch (const std::exception& e) {
    copy_message(e.what(), error, error_size);
    return -1;
  }
}

double dtsim_cuda_time_stream(double bytes, int warmup, int repeats, char* error, int error_size) {
  try {
    return dtsim::profile::cuda::time_stream(bytes, warmup, repeats);
  } catch (const std::exception& e) {
    copy_message(e.what(), error, error_size);
    return -1;
  }
}

}  // extern "C"
