#pragma once
#include <cstdint>
#include <string>
#include <vector>

// Kernel timing on an NVIDIA GPU through cuBLAS and CUDA events. Plain C++ so the rest of the
// project never sees a CUDA header. cuda_timing.cu implements it in the libdtsim_cuda.so plugin;
// cuda_loader.cpp implements it in dtsim by loading that plugin, and reports when there is none.
namespace dtsim::profile::cuda {

struct DeviceInfo {
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int driver_version = 0, runtime_version = 0, cublas_version = 0;
  int sm_clock_mhz = 0, memory_clock_mhz = 0, sm_count = 0;
};

// Whether a GPU can be used; `why` says why not.
bool probe(DeviceInfo& info, std::string& why);

// Seconds of each of `repeats` runs (CUDA events) of `batch` GEMMs C[m,n] = A[m,k] B[k,n] in
// `dtype` (bf16, fp16, tf32 or fp32), after `warmup` untimed runs.
std::vector<double> time_gemm(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k,
                              const std::string& dtype, int warmup, int repeats);
// The same for a streaming kernel y = a x + y over `bytes` (12 bytes per fp32 element).
std::vector<double> time_stream(double bytes, int warmup, int repeats);
// Host seconds per launch of an empty kernel, launched 1,000 times back to back (the median of
// `repeats` such batches): the launch latency a stream of short kernels cannot hide.
double time_launch(int warmup, int repeats);

}  // namespace dtsim::profile::cuda
