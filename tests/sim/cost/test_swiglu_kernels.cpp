// SwiGLU as eager PyTorch runs it (issue 30): the gate and up halves as strided chunks of one GEMM's
// output or as two GEMMs' outputs, against published and this project's timings, and the key.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "eager_op_helpers.hpp"
#include "scenario_helpers.hpp"
#include "sim/config/scenario.hpp"
#include "sim/cost/roofline.hpp"
#include "sim/cost/stack.hpp"
#include "sim/cost/swiglu_kernels.hpp"

using namespace dtsim;

namespace {

// The model's SwiGLU kernel over `elems` outputs: 3 bf16 tensors forward, 5 backward.
models::Kernel swiglu(models::KernelRole role, double elems) {
  return test::role_kernel(role, elems, role == models::KernelRole::SwiGluForward ? 6.0 : 10.0);
}

// The stack's quote for SwiGLU's kernels over `elems` outputs, forward and backward.
std::pair<double, double> quoted(const cost::DeviceProfile& d, double elems) {
  return test::quoted_pair(d, models::KernelRole::SwiGluForward, 6.0, models::KernelRole::SwiGluBackward, 10.0, elems);
}

}  // namespace

TEST(SwigluKernels, ChunkedHalvesRunUnvectorisedAndTheBackwardWritesACat) {
  const auto k = swiglu(models::KernelRole::SwiGluBackward, 1e6);
  const auto chunked = cost::swiglu_passes(cost::Swiglu::Chunked, k);
  const auto separate = cost::swiglu_passes(cost::Swiglu::Separate, k);
  ASSERT_EQ(chunked.size(), 4u);  // dy * u, dy * s, silu's backward, chunk's cat
  ASSERT_EQ(separate.size(), 3u);
  double scalar = 0, bytes = 0;
  for (const auto& p : chunked) scalar += p.unvectorised_elems, bytes += p.bytes;
  EXPECT_DOUBLE_EQ(scalar, 2e6);
  EXPECT_DOUBLE_EQ(bytes, 26e6);  // (3 + 3 + 3 + 4) x 2 bytes
  for (const auto& p : separate) EXPECT_EQ(p.unvectorised_elems, 0);
  for (const auto& p : cost::swiglu_passes(cost::Swiglu::Chunked, swiglu(models::KernelRole::SwiGluForward, 1e6)))
    EXPECT_DOUBLE_EQ(p.unvectorised_elems, 1e6);  // silu(g), then s * u
  EXPECT_TRUE(cost::swiglu_passes(cost::Swiglu::Chunked, swiglu(models::KernelRole::GeluForward, 1e6)).empty());
}

TEST(SwigluKernels, MegatronsUnfusedSwigluRunsAsLigerTimedItOnTheH100) {
  // Megatron-LM's unfused bias-free SwiGLU, torch.chunk then F.silu(x1) * x2, on 8,192 tokens
  // (Liger-Kernel benchmark data, H100 80GB HBM3; memory_bound.json mem-060/061 and mem-066/067):
  // ffn 8,192: 0.383 ms forward, 1.170 ms forward and backward; ffn 16,384: 0.750 and 2.296 ms.
  // At the streaming rate (every kernel vectorised) the forwards would be 40 % short.
  auto d = config::load_device_profile("h100-sxm-80gb");
  d.stack = *cost::find_stack("pytorch-eager");
  d.stack.swiglu = cost::Swiglu::Chunked;
  const double fwd[] = {0.383e-3, 0.750e-3}, full[] = {1.170e-3, 2.296e-3};
  for (int i = 0; i < 2; ++i) {
    const double n = 8192.0 * (i == 0 ? 8192 : 16384);
    const auto [f, b] = quoted(d, n);
    EXPECT_NEAR(f / fwd[i], 1.0, 0.05) << n;
    EXPECT_NEAR((f + b) / full[i], 1.0, 0.10) << n;
  }
  d.stack.swiglu = cost::Swiglu::Separate;
  EXPECT_LT(quoted(d, 8192.0 * 16384).first / fwd[1], 0.65);
}

TEST(SwigluKernels, SeparateHalvesStreamAsThisProjectsH200RanThem) {
  // F.silu(a) * b on contiguous a and b, 8,192 x 14,336 bf16 elements, PyTorch 2.11
  // (docs/gpu_check/h200-2026-11-28/microbench.json, eager "swiglu"): 0.287 ms forward, 0.783 ms
  // forward and backward.
  std::ifstream in(std::string(DTSIM_SOURCE_DIR) + "/docs/gpu_check/h200-2026-11-28/microbench.json");
  const auto j = nlohmann::json::parse(in);
  auto d = config::load_device_profile("h200-sxm-141gb");
  d.stack = *cost::find_stack("pytorch-eager");
  ASSERT_EQ(d.stack.swiglu, cost::Swiglu::Separate);
  int rows = 0;
  for (const auto& r : j["eager"]) {
    if (r["op"] != "swiglu") continue;
    const auto [f, b] = quoted(d, r["bytes_fwd"].get<double>() / 6);  // reads 2 and writes 1 bf16 tensor
    EXPECT_NEAR(f / (r["fwd_ms"].get<double>() * 1e-3), 1.0, 0.08);
    EXPECT_NEAR((f + b) / (r["fwd_bwd_ms"].get<double>() * 1e-3), 1.0, 0.10);
    ++rows;
  }
  EXPECT_EQ(rows, 1);
}

TEST(SwigluKernels, PresetsAndKey) {
  for (const char* separate : {"pytorch-eager", "pytorch-eager-2.8", "llm-foundry"})
    EXPECT_EQ(cost::find_stack(separate)->swiglu, cost::Swiglu::Separate) << separate;
  EXPECT_EQ(cost::find_stack("default")->swiglu, cost::Swiglu::Chunked);
  const auto e = test::input_error_over_base(R"({"extends": "base.json", "stack": {"preset": "pytorch-eager", "swiglu": "split"}})");
  EXPECT_NE(e.find("/stack/swiglu"), std::string::npos) << e;
  EXPECT_NE(e.find("separate"), std::string::npos) << e;
  // The compiled stacks fuse it whatever the key says.
  auto d = config::load_device_profile("h100-sxm-80gb");
  d.stack = *cost::find_stack("torchtitan-compile");
  const double compiled = quoted(d, 1e8).first;
  d.stack.swiglu = cost::Swiglu::Separate;
  EXPECT_DOUBLE_EQ(quoted(d, 1e8).first, compiled);
}
