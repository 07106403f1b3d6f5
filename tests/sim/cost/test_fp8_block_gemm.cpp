// Block-scaled FP8 (training.fp8_recipe "blockwise": a scale per 1 x 128 tile and 128 x 128
// block, DeepSeek-V3's recipe and Transformer Engine's Float8BlockScaling): GEMMs priced on the
// block-scaled kernels' curve against DeepGEMM's published H800 table, the casts' bytes, and a
// step against the same step under delayed scaling.
#include <gtest/gtest.h>

#include <cmath>

#include "llama_spec.hpp"
#include "models/model_graph.hpp"
#include "scenario_helpers.hpp"
#include "sim/config/scenario.hpp"
#include "sim/cost/roofline.hpp"

using namespace dtsim;

namespace {

// An FP8 GEMM of m x n x k as the model builds one: 1-byte operands, a bf16 output.
models::Kernel fp8_gemm(double m, double n, double k, bool block) {
  models::Kernel g;
  g.kind = models::KernelKind::Gemm;
  g.m = static_cast<std::int64_t>(m), g.n = static_cast<std::int64_t>(n), g.k = static_cast<std::int64_t>(k);
  g.flops = 2 * m * n * k;
  g.bytes = m * k + k * n + 2 * m * n;
  g.fp8 = true;
  g.fp8_block = block;
  return g;
}

// deepseek-ai/DeepGEMM README.md@a6d97a1c, "Normal GEMMs for dense models", H800, TFLOP/s
// (/work/shared/calibration/microbench/gemm.json gemm-027..gemm-044).
struct Row {
  double m, n, k, tflops;
};
constexpr Row kDeepGemm[] = {
    {64, 2112, 7168, 206},    {64, 24576, 1536, 289},   {64, 32768, 512, 219},    {64, 7168, 16384, 336},
    {64, 4096, 7168, 287},    {64, 7168, 2048, 295},    {128, 2112, 7168, 352},   {128, 24576, 1536, 535},
    {128, 32768, 512, 358},   {128, 7168, 16384, 645},  {128, 4096, 7168, 533},   {128, 7168, 2048, 510},
    {4096, 2112, 7168, 1058}, {4096, 24576, 1536, 990}, {4096, 32768, 512, 590},  {4096, 7168, 16384, 1358},
    {4096, 4096, 7168, 1304}, {4096, 7168, 2048, 1025}};

double tflops(const cost::DeviceProfile& d, const models::Kernel& k) { return k.flops / cost::kernel_time(d, k, "bf16") / 1e12; }

// Two Llama 3 8B-sized blocks on 8 GPUs of `device` in FP8 under `recipe`, one micro-batch.
std::string fp8_step(const std::string& device, const std::string& recipe) {
  return R"({"extends": "base.json", "hardware": {"device": ")" + device + R"("},
    "model": {"kind": "transformer", "num_layers": 2, "hidden_size": 4096, "num_heads": 32, "num_kv_heads": 8,
              "ffn_hidden_size": 14336, "seq_len": 4096, "vocab_size": 32000, "mlp": "swiglu", "tied_embeddings": false,
              "norm": "rmsnorm", "linear_bias": false, "position_embedding": "rotary", "dropout": false},
    "parallelism": {"data": 8, "micro_batch_size": 1},
    "training": {"global_batch_size": 8, "attention": "flash", "precision": "fp8", "fp8_recipe": ")" + recipe + R"("},
    "simulation": {"backend": "analytical"}})";
}

}  // namespace

// All 18 rows the curve was fitted on (through the memory roofline): rms 12.6 %; the
// compute-bound ones (M = 4096) within 15 %, the memory-bound ones (M = 64, 128) within 50 % (the
// worst, N = 2112, leaves most SMs idle: wave quantization, not modelled). The per-tensor FP8
// curve misses the K = 512 row by more than 2x.
TEST(Fp8BlockGemm, FollowsDeepGemmsTable) {
  const auto d = config::load_device_profile("h100-sxm-80gb");
  ASSERT_TRUE(d.fp8_block_gemm.has_value());
  double squares = 0;
  for (const auto& r : kDeepGemm) {
    const double ratio = tflops(d, fp8_gemm(r.m, r.n, r.k, true)) / r.tflops;
    SCOPED_TRACE(::testing::Message() << r.m << " x " << r.n << " x " << r.k);
    EXPECT_LT(std::abs(ratio - 1), r.m == 4096 ? 0.15 : 0.5);
    squares += std::log(ratio) * std::log(ratio);
  }
  EXPECT_LT(std::sqrt(squares / 18), 0.13);
  EXPECT_GT(tflops(d, fp8_gemm(4096, 32768, 512, false)) / 590, 2.0);
  // The K term alone: at one size, K = 512 against K = 16384.
  const auto shallow = fp8_gemm(4096, 32768, 512, true), deep = fp8_gemm(4096, 1024, 16384, true);
  EXPECT_NEAR(tflops(d, shallow) / tflops(d, deep), (512.0 / 1092) / (16384.0 / 16964), 1e-9);
}

// Blockwise casts find each tile's amax in their own pass and write a scale per 128 elements of
// each of the two copies: 4 + 8/128 bytes an element, no scale kernels; the GEMMs are block-scaled.
TEST(Fp8BlockGemm, BlockwiseCastsCarryTheirScales) {
  models::BuildOptions o{1, 2, models::Attention::Flash};
  o.fp8 = true;
  o.fp8_scaling = models::Fp8Scaling::Blockwise;
  const auto block = models::build_transformer(test::small_llama(2), o).layers[1];
  o.fp8_scaling = models::Fp8Scaling::Delayed;
  const auto delayed = models::build_transformer(test::small_llama(2), o).layers[1];
  const auto& b = test::op_named(block, "qkv");
  const auto& d = test::op_named(delayed, "qkv");
  ASSERT_EQ(b.forward.size() + 1, d.forward.size());  // no scale kernel
  EXPECT_EQ(b.forward[0].name, "qkv.cast_fp8");
  EXPECT_DOUBLE_EQ(b.forward[0].bytes, 512.0 * 1024 * (4 + 8.0 / 128));
  EXPECT_DOUBLE_EQ(d.forward[0].bytes, 512.0 * 1024 * 4);
  EXPECT_TRUE(b.forward[1].fp8 && b.forward[1].fp8_block);
  EXPECT_FALSE(d.forward[2].fp8_block);
  EXPECT_DOUBLE_EQ(b.saved_bytes, d.saved_bytes);
}

// A step under blockwise scaling on an H100: slower than delayed scaling (the block-scaled
// kernels reach less of the FP8 peak at these shapes), the same FLOPs and memory; result.json and
// the summary say which recipe ran.
TEST(Fp8BlockGemm, AStepStatesItsRecipe) {
  auto run = [](const std::string& recipe) {
    const auto r = test::simulate_over_base(fp8_step("h100-sxm-80gb", recipe));
    test::expect_parts_sum_to_step(r);
    return r;
  };
  const auto delayed = run("delayed"), block = run("blockwise");
  EXPECT_GT(block.step_time_s, delayed.step_time_s);
  EXPECT_DOUBLE_EQ(block.model_flops, delayed.model_flops);
  EXPECT_DOUBLE_EQ(block.device_peak(), delayed.device_peak());
  EXPECT_EQ(block.scenario_spec.training.fp8_scaling, models::Fp8Scaling::Blockwise);
}

// MXFP8 (fp8_recipe "mxfp8"): an E8M0 byte per 32 elements of each copy, 4 + 2/32 bytes an
// element, no scale kernels, GEMMs at the FP8 rate (Blackwell applies the scales); refused where
// the tensor cores take no block-scaled operands.
TEST(Fp8BlockGemm, Mxfp8CastsAndWhereItRuns) {
  models::BuildOptions o{1, 2, models::Attention::Flash};
  o.fp8 = true;
  o.fp8_scaling = models::Fp8Scaling::Mx;
  const auto l = models::build_transformer(test::small_llama(2), o).layers[1];
  const auto& qkv = test::op_named(l, "qkv");
  ASSERT_EQ(qkv.forward.size(), 2u);
  EXPECT_DOUBLE_EQ(qkv.forward[0].bytes, 512.0 * 1024 * (4 + 2.0 / 32));
  EXPECT_TRUE(qkv.forward[1].fp8);
  EXPECT_FALSE(qkv.forward[1].fp8_block);
  const auto r = test::simulate_over_base(fp8_step("b200", "mxfp8"));
  test::expect_parts_sum_to_step(r);
  EXPECT_NE(test::input_error_over_base(fp8_step("h100-sxm-80gb", "mxfp8")).find("did you mean \"blockwise\""), std::string::npos);
}
