// Under FP8 (training.precision "fp8") an MoE block's experts, shared experts and latent
// attention's projections run Transformer Engine's FP8 GEMMs as a dense block's linears do; the
// router, norms and attention itself stay in the activations' precision (DeepSeek-V3 report,
// arXiv:2412.19437, Sec. 3.3; Megatron-Core's TEGroupedMLP).
#include <gtest/gtest.h>

#include <algorithm>

#include "llama_spec.hpp"
#include "models/model_graph.hpp"

using namespace dtsim;
using test::op_named;

namespace {

// The small MoE with one shared expert (test::small_moe), latent attention where `mla`.
models::TransformerSpec small_moe(bool mla) { return test::small_moe(1, mla); }

models::ModelGraph build(const models::TransformerSpec& s, bool fp8) {
  models::BuildOptions o{2, 2, models::Attention::Flash};
  o.expert = 2;
  o.fp8 = fp8;
  return models::build_transformer(s, o);
}

bool runs_fp8(const models::Op& op) {
  return std::any_of(op.forward.begin(), op.forward.end(), [](const models::Kernel& k) { return k.fp8; });
}

constexpr double kHistoryBytes = 1024.0 * 4.0 * 2.0;  // one tensor's amax history, read and written

}  // namespace

// 1,024 tokens x top-2 over 8 experts on 2 expert-parallel ranks: each of a rank's 4 experts gets
// 1,024 x 2 x 2 / 8 = 512 rows. The gate-up GEMMs in FP8 (1-byte operands, bf16 output), the
// permuted input cast (4 bytes moved per element with delayed scaling), one amax history per
// expert for input and weight forward and for the output gradient backward; backward keeps the
// FP8 input, a byte per element.
TEST(Fp8Experts, GroupedGemmsRunInFp8WithTheirCasts) {
  const auto s = small_moe(false);
  const auto fp8_graph = build(s, true), bf16_graph = build(s, false);
  const auto& up = op_named(fp8_graph.layers[1], "moe.experts.gate_up");
  const auto& bf16 = op_named(bf16_graph.layers[1], "moe.experts.gate_up");
  const double rows = 4.0 * 512, h = 1024, width = 2.0 * 512;
  ASSERT_EQ(up.forward.size(), 3u);
  EXPECT_EQ(up.forward[0].name, "moe.experts.gate_up.cast_fp8");
  EXPECT_DOUBLE_EQ(up.forward[0].bytes, rows * h * 4.0);
  EXPECT_DOUBLE_EQ(up.forward[1].bytes, 2.0 * kHistoryBytes * 4);
  const auto& gemm = up.forward[2];
  EXPECT_TRUE(gemm.fp8);
  EXPECT_EQ(gemm.batch, 4);
  EXPECT_EQ(gemm.m, 512);
  EXPECT_DOUBLE_EQ(gemm.bytes, 4.0 * (512.0 * h + h * width + 2.0 * 512.0 * width));
  EXPECT_DOUBLE_EQ(gemm.flops, bf16.forward[0].flops);
  ASSERT_EQ(up.backward.size(), 4u);
  EXPECT_DOUBLE_EQ(up.backward[0].bytes, rows * width * 4.0);
  EXPECT_DOUBLE_EQ(up.backward[1].bytes, kHistoryBytes * 4);
  EXPECT_TRUE(up.backward[2].fp8 && up.backward[3].fp8);
  EXPECT_EQ(up.backward[3].role, models::KernelRole::WeightGrad);
  EXPECT_DOUBLE_EQ(up.saved_bytes, rows * h);
  EXPECT_DOUBLE_EQ(bf16.saved_bytes, rows * h * 2.0);
  EXPECT_DOUBLE_EQ(up.params, bf16.params);
}

// What runs in FP8 and what does not; the model's FLOPs and parameters are the same either way.
TEST(Fp8Experts, SharedExpertsAndLatentAttentionToo) {
  const auto s = small_moe(true);
  const auto fp8 = build(s, true), bf16 = build(s, false);
  const auto& block = fp8.layers[1];
  for (const char* name : {"moe.experts.gate_up", "moe.experts.down", "moe.shared.gate_up", "moe.shared.down", "mla.q_down", "mla.q_up",
                           "mla.kv_down", "mla.kv_up", "attention.out"})
    EXPECT_TRUE(runs_fp8(op_named(block, name))) << name;
  for (const char* name : {"moe.router", "flash_attention", "mla.q_norm"}) EXPECT_FALSE(runs_fp8(op_named(block, name))) << name;
  for (const auto& op : bf16.layers[1].ops) EXPECT_FALSE(runs_fp8(op)) << op.name;
  EXPECT_DOUBLE_EQ(fp8.model_flops(), bf16.model_flops());
  EXPECT_DOUBLE_EQ(fp8.params(), bf16.params());
}
