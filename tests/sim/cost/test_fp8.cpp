// Issue 14 item 4: FP8 training as Transformer Engine runs it.
#include <gtest/gtest.h>

#include "run_dtsim.hpp"
#include "scenario_helpers.hpp"
#include "sim/cost/roofline.hpp"

namespace {

using dtsim::test::simulate_over_base;

// A small GQA model (16 heads, 4 KV heads, SwiGLU, no biases) with 8K sequences on 8 GPUs.
std::string model_on(const std::string& device, const std::string& precision) {
  return R"({"extends": "base.json", "hardware": {"device": ")" + device + R"("},
    "model": {"kind": "transformer", "num_layers": 2, "hidden_size": 1024, "num_heads": 16, "num_kv_heads": 4,
              "ffn_hidden_size": 4096, "seq_len": 8192, "vocab_size": 32000, "mlp": "swiglu", "tied_embeddings": false,
              "norm": "rmsnorm", "linear_bias": false, "position_embedding": "rotary", "dropout": false},
    "parallelism": {"data": 8, "micro_batch_size": 1},
    "training": {"global_batch_size": 16, "attention": "flash", "precision": ")" + precision + R"("},
    "simulation": {"backend": "analytical"}})";
}

// A large GEMM in FP8 takes the bf16 time scaled by the two peaks and the two measured
// efficiencies: on H100 1.74x faster, not the 2x the peaks alone promise.
TEST(Fp8, GemmTimeFollowsTheFp8PeakAndItsOwnEfficiency) {
  const auto d = dtsim::config::load_device_profile("h100-sxm-80gb");
  dtsim::models::Kernel k;
  k.kind = dtsim::models::KernelKind::Gemm;
  k.m = k.n = k.k = 16384;
  k.flops = 2.0 * 16384.0 * 16384.0 * 16384.0;
  k.bytes = 1e6;
  const double bf16 = dtsim::cost::kernel_time(d, k, "bf16");
  k.fp8 = true;
  const double fp8 = dtsim::cost::kernel_time(d, k, "bf16");
  const double expected = (989.4e12 * d.gemm.at(k.flops)) / (1978.9e12 * d.fp8_gemm->at(k.flops));
  EXPECT_NEAR(fp8 / bf16, expected, 1e-12);
  EXPECT_GT(bf16 / fp8, 1.6);
  EXPECT_LT(bf16 / fp8, 1.9);
}

// FP8 on H100: a faster step, the blocks' GEMMs at the FP8 peak, cast kernels, an FP8 copy and
// transpose of every block weight (2 bytes per parameter) and 1-byte saved GEMM inputs.
TEST(Fp8, StepFasterWeightCopiesInMemorySavedInputsSmaller) {
  const auto bf16 = simulate_over_base(model_on("h100-sxm-80gb", "bf16"));
  const auto fp8 = simulate_over_base(model_on("h100-sxm-80gb", "fp8"));
  EXPECT_LT(fp8.step_time_s, bf16.step_time_s);
  EXPECT_GT(fp8.step_time_s, 0.5 * bf16.step_time_s);
  // 2 blocks of QKV (1024 x 1536), output (1024 x 1024), gate and up (1024 x 8192), down (4096 x
  // 1024) = 15,204,352 parameters each.
  EXPECT_DOUBLE_EQ(fp8.memory.params - bf16.memory.params, 2.0 * 2 * 15204352.0);
  EXPECT_LT(fp8.memory.activations, bf16.memory.activations);
  // Model FLOPs do not change with the precision.
  EXPECT_DOUBLE_EQ(fp8.model_flops, bf16.model_flops);
  bool cast = false, fp8_gemm = false, bf16_head = false;
  for (const auto& w : fp8.plan.graph.works)
    for (const auto& k : w.kernels) {
      cast = cast || k.name == "qkv.cast_fp8";
      fp8_gemm = fp8_gemm || (k.name == "mlp.gate_up" && k.fp8);
      bf16_head = bf16_head || (k.name == "lm_head" && !k.fp8);
    }
  EXPECT_TRUE(cast);
  EXPECT_TRUE(fp8_gemm);
  EXPECT_TRUE(bf16_head);  // the output layer stays in bf16, as in Megatron-LM
}

// Current scaling (TE's Float8CurrentScaling) reads each tensor once more for its amax before the
// cast: 6 bytes moved per element instead of 4, and no amax history.
TEST(Fp8, CurrentScalingCastsReadTheTensorTwice) {
  std::string current = model_on("h100-sxm-80gb", "fp8");
  current.replace(current.find(R"("precision")"), 0, R"("fp8_recipe": "current", )");
  const auto delayed = simulate_over_base(model_on("h100-sxm-80gb", "fp8"));
  const auto now = simulate_over_base(current);
  auto cast_bytes = [](const dtsim::results::Result& r) {
    for (const auto& w : r.plan.graph.works)
      for (const auto& k : w.kernels)
        if (k.name == "mlp.fc2.cast_fp8") return k.bytes;
    return 0.0;
  };
  const double elems = 8192.0 * 4096;  // fc2's input: tokens x ffn
  EXPECT_DOUBLE_EQ(cast_bytes(delayed), 4 * elems);
  EXPECT_DOUBLE_EQ(cast_bytes(now), 6 * elems);
  EXPECT_GT(now.step_time_s, delayed.step_time_s);
  std::string bf16 = model_on("h100-sxm-80gb", "bf16");
  bf16.replace(bf16.find(R"("precision")"), 0, R"("fp8_recipe": "current", )");
  EXPECT_EQ(dtsim::test::input_error_over_base(bf16), "/training/fp8_recipe: needs \"precision\": \"fp8\"");
}

TEST(Fp8, RefusedOnADeviceWithoutFp8) {
  dtsim::test::TempDir dir;
  dir.file("base.json", dtsim::test::kValidScenario);
  const std::string file = dir.file("s.json", model_on("a100-sxm-80gb", "fp8"));
  auto r = dtsim::test::run_dtsim({"run", file, "-o", dir.path("out")}, dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("s.json:/training/precision: device a100-sxm-80gb has no fp8 peak"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.path("out/result.json")));
}

}  // namespace
