// A kernel's role from its name in a profiler trace: the only place dtsim reads kernel names, at
// the edge where measurements come in; everything after it works with TraceRole.
#include <algorithm>
#include <cctype>
#include <string_view>

#include "sim/calibrate/trace_parse.hpp"

namespace dtsim::calibrate {

const char* to_string(TraceRole r) {
  switch (r) {
    case TraceRole::Gemm: return "gemm";
    case TraceRole::Attention: return "attention";
    case TraceRole::Elementwise: return "elementwise";
    case TraceRole::Nccl: return "nccl";
    case TraceRole::Optimizer: return "optimizer";
    case TraceRole::Copy: return "memcpy/memset";
    case TraceRole::Other: return "other";
  }
  return "?";
}

namespace {
bool has(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }
template <std::size_t N>
bool has_any(const std::string& s, const std::string_view (&parts)[N]) {
  return std::any_of(std::begin(parts), std::end(parts), [&](std::string_view p) { return has(s, p); });
}
}  // namespace

// Checked in this order, so that a name matching two (FlashAttention's CUTLASS kernels, a
// foreach kernel of the optimizer) takes the first:
// - NCCL's kernels are ncclKernel_* / ncclDevKernel_* (NVIDIA/nccl src/device/generate.py).
// - Attention: FlashAttention's flash_fwd/bwd kernels, cuDNN's fused "sdpa"/"fmha"/"mha" ones,
//   PyTorch's memory-efficient attention ("attention" in fmha_cutlassF / "efficient_attention").
// - Optimizer: PyTorch's fused and foreach optimizers run multi_tensor_apply_kernel with an Adam,
//   AdamW, SGD... functor; apex's multi_tensor_adam.
// - GEMM: cuBLAS/cuBLASLt (gemm, sm90_xmma, nvjet), CUTLASS, Triton matmul templates (mm).
// - Element-wise: ATen's vectorized/unrolled element-wise, reduce, norm, softmax, dropout and
//   copy kernels, and Triton's fused ones (triton_poi/red/per).
TraceRole role_of_kernel(const std::string& name) {
  std::string n(name.size(), ' ');
  std::transform(name.begin(), name.end(), n.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  static constexpr std::string_view attention[] = {"flash", "fmha", "attention", "sdpa", "_mha", "mha_"};
  // Not "lamb" alone: every C++ lambda in a kernel's template arguments would match it.
  static constexpr std::string_view optimizer[] = {"adam", "sgd", "adagrad", "rmsprop", "multi_tensor_lamb", "lion"};
  static constexpr std::string_view gemm[] = {"gemm", "xmma", "nvjet", "cutlass", "cublas", "triton_tem", "_mm_", "matmul"};
  static constexpr std::string_view elementwise[] = {"elementwise", "vectorized", "unrolled", "reduce", "norm",   "softmax",
                                                     "dropout",     "triton_",    "copy",     "fill",   "cat",    "index",
                                                     "gelu",        "silu",       "relu",     "embedding", "loss", "multi_tensor"};
  if (n.starts_with("nccl")) return TraceRole::Nccl;
  if (has_any(n, attention)) return TraceRole::Attention;
  if (has_any(n, optimizer)) return TraceRole::Optimizer;
  if (has_any(n, gemm)) return TraceRole::Gemm;
  if (has_any(n, elementwise)) return TraceRole::Elementwise;
  return TraceRole::Other;
}

}  // namespace dtsim::calibrate
