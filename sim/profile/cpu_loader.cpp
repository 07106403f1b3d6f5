#include "sim/profile/cpu_loader.hpp"

#include "sim/profile/cpu_kernels.hpp"  // DTSIM_CPU_ABI; the functions are reached through dlsym only

#include <dlfcn.h>

#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace dtsim::profile::cpu {

namespace {

using Describe = int (*)(char*, int, char*, int, char*, int, int*);
using New = void* (*)(const char*, long long, long long, long long, long long, double, char*, int);
using Run = void (*)(void*, long long);
using Free = void (*)(void*);
using ConvNew = void* (*)(const char*, const long long*, long long, char*, int);
using Conv2d = int (*)(const float*, const float*, const long long*, float*, char*, int);

struct Plugin {
  Build build;
  New make = nullptr;
  Run run = nullptr;
  Free free = nullptr;
  ConvNew conv_new = nullptr;
  Conv2d conv2d = nullptr;
  std::string error;
};

// Beside the binary (dtsim), one folder up (the test binaries in build/tests), then the build
// folder this dtsim was configured in.
std::vector<std::filesystem::path> candidates() {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    out.push_back(exe.parent_path() / "libdtsim_cpu.so");
    out.push_back(exe.parent_path().parent_path() / "libdtsim_cpu.so");
  }
#ifdef DTSIM_PLUGIN_DIR
  out.push_back(std::filesystem::path(DTSIM_PLUGIN_DIR) / "libdtsim_cpu.so");
#endif
  return out;
}

Plugin load() {
  Plugin p;
  std::filesystem::path path;
  for (const auto& c : candidates())
    if (std::filesystem::exists(c)) {
      path = c;
      break;
    }
  if (path.empty()) {
    p.error = "libdtsim_cpu.so, the CPU kernels, is not beside the dtsim binary (build the dtsim_cpu target)";
    return p;
  }
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    p.error = std::string("cannot load the CPU kernels: ") + dlerror();
    return p;
  }
  const auto* isa = static_cast<const char*>(dlsym(h, "dtsim_cpu_isa"));
  const auto* abi = static_cast<const int*>(dlsym(h, "dtsim_cpu_abi"));
  auto describe = reinterpret_cast<Describe>(dlsym(h, "dtsim_cpu_describe"));
  p.make = reinterpret_cast<New>(dlsym(h, "dtsim_cpu_kernel_new"));
  p.run = reinterpret_cast<Run>(dlsym(h, "dtsim_cpu_kernel_run"));
  p.free = reinterpret_cast<Free>(dlsym(h, "dtsim_cpu_kernel_free"));
  p.conv_new = reinterpret_cast<ConvNew>(dlsym(h, "dtsim_cpu_conv_new"));
  p.conv2d = reinterpret_cast<Conv2d>(dlsym(h, "dtsim_cpu_conv2d"));
  if (!isa || !abi || !describe || !p.make || !p.run || !p.free || !p.conv_new || !p.conv2d || *abi != DTSIM_CPU_ABI) {
    p.error = path.string() + " is not this dtsim's CPU kernel plugin";
    return p;
  }
  // Checked from data before any of its code runs: code for a missing ISA would die on SIGILL.
  std::string missing;
  if (!cpu_supports(isa, missing)) {
    p.error = path.string() + " was compiled for " + isa + " and this CPU lacks " + missing +
              ": rebuild dtsim on this machine, or configure with -DDTSIM_PROFILE_NATIVE=OFF";
    return p;
  }
  char eigen[64] = {}, compiler[256] = {}, simd[256] = {};
  describe(eigen, sizeof eigen, compiler, sizeof compiler, simd, sizeof simd, &p.build.threads);
  p.build.isa = isa;
  p.build.eigen = eigen;
  p.build.compiler = compiler;
  p.build.simd = simd;
  p.build.path = path.string();
  return p;
}

const Plugin& plugin() {
  static const Plugin p = load();
  if (!p.error.empty()) throw std::runtime_error(p.error);
  return p;
}

}  // namespace

bool cpu_supports(const std::string& isa, std::string& missing) {
  __builtin_cpu_init();
  std::stringstream in(isa);
  for (std::string f; std::getline(in, f, '+');) {
    bool ok = false;
    // __builtin_cpu_supports takes literals only.
    if (f == "sse2") ok = __builtin_cpu_supports("sse2");
    else if (f == "sse4.2") ok = __builtin_cpu_supports("sse4.2");
    else if (f == "avx") ok = __builtin_cpu_supports("avx");
    else if (f == "avx2") ok = __builtin_cpu_supports("avx2");
    else if (f == "fma") ok = __builtin_cpu_supports("fma");
    else if (f == "avx512f") ok = __builtin_cpu_supports("avx512f");
    if (!ok) {
      missing = f;
      return false;
    }
  }
  return true;
}

const Build& build() { return plugin().build; }

Kernel::Kernel(const std::string& kind, std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k, double bytes) {
  const auto& p = plugin();
  char error[512] = {};
  handle_ = p.make(kind.c_str(), batch, m, n, k, bytes, error, sizeof error);
  if (!handle_) throw std::runtime_error(std::string("CPU kernel ") + kind + ": " + error);
}

Kernel::Kernel(const std::string& pass, const std::array<long long, 12>& shape, std::int64_t groups) {
  const auto& p = plugin();
  char error[512] = {};
  handle_ = p.conv_new(pass.c_str(), shape.data(), groups, error, sizeof error);
  if (!handle_) throw std::runtime_error(std::string("CPU kernel ") + pass + ": " + error);
}

std::vector<float> conv2d(const std::vector<float>& x, const std::vector<float>& w, const std::array<long long, 12>& shape,
                          std::size_t outputs) {
  std::vector<float> y(outputs);
  char error[512] = {};
  if (plugin().conv2d(x.data(), w.data(), shape.data(), y.data(), error, sizeof error) != 0)
    throw std::runtime_error(std::string("CPU convolution: ") + error);
  return y;
}

Kernel::~Kernel() {
  if (handle_) plugin().free(handle_);
}

void Kernel::run(std::int64_t times) { plugin().run(handle_, times); }

}  // namespace dtsim::profile::cpu
