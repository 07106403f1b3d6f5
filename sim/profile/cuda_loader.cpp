#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "sim/profile/cuda_timing.hpp"

// dtsim does not link CUDA: cuBLAS alone would add hundreds of MB to every process. A CUDA build
// puts libdtsim_cuda.so beside the binary, and `profile --device cuda` loads it here.
namespace dtsim::profile::cuda {

namespace {

using Probe = int (*)(char*, int, int*, char*, int);
using TimeGemm = double (*)(long long, long long, long long, long long, const char*, int, int, char*, int);
using TimeStream = double (*)(double, int, int, char*, int);
using TimeLaunch = double (*)(int, int, char*, int);
using GemmSamples = int (*)(long long, long long, long long, long long, const char*, int, int, double*, int, char*, int);
using StreamSamples = int (*)(double, int, int, double*, int, char*, int);

struct Plugin {
  Probe probe = nullptr;
  TimeGemm gemm = nullptr;
  TimeStream stream = nullptr;
  TimeLaunch launch = nullptr;  // absent from plugins built before it
  GemmSamples gemm_samples = nullptr;  // absent from plugins built before them: medians only
  StreamSamples stream_samples = nullptr;
  std::string error;
};

const Plugin& plugin() {
  static const Plugin p = [] {
    Plugin out;
    std::error_code ec;
    const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    const auto path = (ec ? std::filesystem::path(".") : exe.parent_path()) / "libdtsim_cuda.so";
    if (!std::filesystem::exists(path)) {
      out.error = "this dtsim was built without CUDA (configure with -DDTSIM_CUDA=ON where the toolkit is installed)";
      return out;
    }
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      out.error = std::string("cannot load the CUDA profiler: ") + dlerror();
      return out;
    }
    out.probe = reinterpret_cast<Probe>(dlsym(h, "dtsim_cuda_probe"));
    out.gemm = reinterpret_cast<TimeGemm>(dlsym(h, "dtsim_cuda_time_gemm"));
    out.stream = reinterpret_cast<TimeStream>(dlsym(h, "dtsim_cuda_time_stream"));
    out.launch = reinterpret_cast<TimeLaunch>(dlsym(h, "dtsim_cuda_time_launch"));
    out.gemm_samples = reinterpret_cast<GemmSamples>(dlsym(h, "dtsim_cuda_gemm_samples"));
    out.stream_samples = reinterpret_cast<StreamSamples>(dlsym(h, "dtsim_cuda_stream_samples"));
    if (!out.probe || !out.gemm || !out.stream) out.error = path.string() + " is not a dtsim CUDA profiler";
    return out;
  }();
  return p;
}

}  // namespace

bool probe(DeviceInfo& info, std::string& why) {
  const auto& p = plugin();
  if (!p.error.empty()) {
    why = p.error;
    return false;
  }
  char name[256] = {}, error[512] = {};
  int v[8] = {};
  if (p.probe(name, sizeof name, v, error, sizeof error) != 0) {
    why = error;
    return false;
  }
  info.name = name;
  info.cc_major = v[0];
  info.cc_minor = v[1];
  info.driver_version = v[2];
  info.runtime_version = v[3];
  info.cublas_version = v[4];
  info.sm_clock_mhz = v[5];
  info.memory_clock_mhz = v[6];
  info.sm_count = v[7];
  return true;
}

std::vector<double> time_gemm(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k,
                              const std::string& dtype, int warmup, int repeats) {
  const auto& p = plugin();
  if (!p.error.empty()) throw std::runtime_error(p.error);
  char error[512] = {};
  if (p.gemm_samples) {
    std::vector<double> s(static_cast<std::size_t>(std::max(1, repeats)));
    const int n_samples = p.gemm_samples(batch, m, n, k, dtype.c_str(), warmup, static_cast<int>(s.size()), s.data(),
                                         static_cast<int>(s.size()), error, sizeof error);
    if (n_samples <= 0) throw std::runtime_error(error);
    s.resize(static_cast<std::size_t>(n_samples));
    return s;
  }
  const double s = p.gemm(batch, m, n, k, dtype.c_str(), warmup, repeats, error, sizeof error);
  if (s < 0) throw std::runtime_error(error);
  return {s};
}

std::vector<double> time_stream(double bytes, int warmup, int repeats) {
  const auto& p = plugin();
  if (!p.error.empty()) throw std::runtime_error(p.error);
  char error[512] = {};
  if (p.stream_samples) {
    std::vector<double> s(static_cast<std::size_t>(std::max(1, repeats)));
    const int n_samples =
        p.stream_samples(bytes, warmup, static_cast<int>(s.size()), s.data(), static_cast<int>(s.size()), error, sizeof error);
    if (n_samples <= 0) throw std::runtime_error(error);
    s.resize(static_cast<std::size_t>(n_samples));
    return s;
  }
  const double s = p.stream(bytes, warmup, repeats, error, sizeof error);
  if (s < 0) throw std::runtime_error(error);
  return {s};
}

double time_launch(int warmup, int repeats) {
  const auto& p = plugin();
  if (!p.error.empty()) throw std::runtime_error(p.error);
  if (!p.launch) throw std::runtime_error("this CUDA profiler plugin does not time launches");
  char error[512] = {};
  const double s = p.launch(warmup, repeats, error, sizeof error);
  if (s < 0) throw std::runtime_error(error);
  return s;
}

}  // namespace dtsim::profile::cuda
