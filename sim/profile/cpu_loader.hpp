#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

// dtsim's side of libdtsim_cpu.so (cpu_kernels.hpp): finds it, checks that this CPU has the ISA it
// was compiled for, and wraps its kernels.
namespace dtsim::profile::cpu {

struct Build {
  std::string isa;       // the features the kernels were compiled for, e.g. "avx512f+avx2+fma"
  std::string simd;      // Eigen's instruction sets in use
  std::string eigen, compiler, path;
  int threads = 1;
};

// The plugin's build; throws std::runtime_error saying why when it cannot be used.
const Build& build();

// Whether this CPU supports every feature of a '+'-separated list; `missing` names the first
// one it lacks (or an unknown name).
bool cpu_supports(const std::string& isa, std::string& missing);

// One kernel of the plugin (see dtsim_cpu_kernel_new for the kinds), ready to run.
class Kernel {
 public:
  Kernel(const std::string& kind, std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k, double bytes);
  // A convolution pass ("conv_fwd", "conv_dgrad", "conv_wgrad") over the first `groups` groups of
  // `shape` (dtsim_cpu_conv_new's order: n, c, h, w, k, r, s, strides, paddings, groups).
  Kernel(const std::string& pass, const std::array<long long, 12>& shape, std::int64_t groups);
  ~Kernel();
  Kernel(const Kernel&) = delete;
  Kernel& operator=(const Kernel&) = delete;
  void run(std::int64_t times = 1);

 private:
  void* handle_ = nullptr;
};

// The plugin's forward convolution (dtsim_cpu_conv2d) into `outputs` floats; throws on a bad shape.
std::vector<float> conv2d(const std::vector<float>& x, const std::vector<float>& w, const std::array<long long, 12>& shape,
                          std::size_t outputs);

}  // namespace dtsim::profile::cpu
