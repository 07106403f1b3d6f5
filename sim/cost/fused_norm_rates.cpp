#include "sim/cost/fused_norm_rates.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include "sim/core/interpolate.hpp"

namespace dtsim::cost {

namespace {

using models::KernelRole;

// Measured by this project on an H200 (2026-11-28, scripts/gpu_microbench.py "eager" section;
// docs/gpu_check/h200-2026-11-28/microbench.json rows "layer_norm" and "rms_norm": bf16, 8,192 x
// 4,096, torch.profiler's kernel times), as shares of its 4.8 TB/s datasheet HBM bandwidth:
// vectorized_layer_norm_kernel (reads x, writes y: 134.2 MB) 53.25 us for LayerNorm, 40.58 us for
// RMSNorm; layer_norm_grad_input_kernel_vectorized (reads x and dy, writes dx) 68.83 and 65.98 us;
// GammaBetaBackwardCUDAKernelTemplate (reads x and dy) 50.21 and 46.66 us. The streams reach
// 4.0-4.4 TB/s on the same GPU; these row-wise kernels do not. Shares of the HBM bandwidth rather
// than rates: this project's H100 steps ran the same kernels at Llama 3 8B's TP-8 shape in
// 56.4, 102 and 58.0 us, where these shares of its 3.35 TB/s give 58.1, 94.5 and 66.9.
struct Shares {
  double forward, input_grad, weight_grad;
};
constexpr Shares kLayerNorm{134.217728e6 / 53.25e-6 / 4.8e12, 201.326592e6 / 68.83e-6 / 4.8e12, 134.217728e6 / 50.21e-6 / 4.8e12};
constexpr Shares kRmsNorm{134.217728e6 / 40.58e-6 / 4.8e12, 201.326592e6 / 65.98e-6 / 4.8e12, 134.217728e6 / 46.66e-6 / 4.8e12};

// torch.compile's own RMSNorm kernel (Inductor, PyTorch 2.7.1) on an H100 SXM, bf16, 32K rows:
// 1,948, 2,303, 1,947 and 1,814 GB/s at rows of 1K, 4K, 8K and 16K (Dao-AILab/quack's README
// figure, media/bf16_kernel_benchmarks_single_row.svg @9649d34; memory_bound.json mem-020..023),
// as shares of the H100's 3.35 TB/s. The figure times forward kernels only.
const std::vector<std::pair<double, double>> kInductorRows{{1024, 1948 / 3350.0}, {4096, 2303 / 3350.0}, {8192, 1947 / 3350.0},
                                                           {16384, 1814 / 3350.0}};

bool forward(const models::Kernel& k) { return k.role == KernelRole::NormForward || k.role == KernelRole::RmsNormForward; }
bool norm(const models::Kernel& k) {
  return forward(k) || k.role == KernelRole::NormBackward || k.role == KernelRole::RmsNormBackward;
}

// A kernel moving `bytes` at `share` of the device's HBM bandwidth, never faster than its
// memory-bound curve.
double at_share(const DeviceProfile& d, double bytes, double share, const std::string& dtype) {
  const models::Kernel stream{"norm_pass", models::KernelKind::Memory, 1, 0, 0, 0, 0, bytes};
  return std::max(bytes / (share * d.hbm_bandwidth), kernel_time(d, stream, dtype));
}

}  // namespace

std::vector<double> compiled_norm_seconds(const DeviceProfile& d, const models::Kernel& k, const std::string& dtype) {
  if (!norm(k) || d.sm_count <= 0 || d.hbm_bandwidth <= 0) return {};
  const double share = log_interpolate(kInductorRows, k.n > 0 ? static_cast<double>(k.n) : 4096);
  // The model's fused kernel, and backward the weight gradient's reduction over tokens, which does
  // not fuse with the row-wise kernel (eager_kernels.cpp): at the forward's share.
  if (forward(k)) return {at_share(d, k.bytes, share, dtype)};
  return {at_share(d, k.bytes, share, dtype), at_share(d, 2 * k.elem_bytes * k.elems, share, dtype)};
}

std::vector<double> fused_norm_seconds(const DeviceProfile& d, const models::Kernel& k, const std::string& dtype) {
  if (!norm(k) || d.sm_count <= 0 || d.hbm_bandwidth <= 0) return {};
  const bool layer = k.role == KernelRole::NormForward || k.role == KernelRole::NormBackward;
  const Shares& s = layer ? kLayerNorm : kRmsNorm;
  const double pass = k.elem_bytes * k.elems;  // one read of x
  if (forward(k)) return {at_share(d, 2 * pass, s.forward, dtype)};
  return {at_share(d, 3 * pass, s.input_grad, dtype), at_share(d, 2 * pass, s.weight_grad, dtype)};
}

}  // namespace dtsim::cost
