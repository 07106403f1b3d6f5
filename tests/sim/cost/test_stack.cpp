// The software stack (issue 30): each mechanism against its closed form, the default stack
// unchanged, and the scenario key's refusals. Whole steps on the analytical backend: one process
// replays SimGrid once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "llama_spec.hpp"
#include "scenario_helpers.hpp"
#include "sim/cost/gemm_alignment.hpp"
#include "sim/config/scenario.hpp"
#include "sim/cost/attention_rates.hpp"
#include "sim/cost/batch_norm_kernels.hpp"
#include "sim/cost/eager_kernels.hpp"
#include "sim/cost/loss_kernels.hpp"
#include "sim/cost/roofline.hpp"
#include "sim/cost/stack.hpp"
#include "sim/results/result.hpp"

using namespace dtsim;

namespace {

const std::string kRoot = DTSIM_SOURCE_DIR;

// One H100 block of GPT-2 XL at micro-batch 8 x 1024, as the gpu_check scenario builds it.
models::Layer gpt2_xl_block() {
  const auto spec = config::load_model_preset("gpt2-xl");
  models::BuildOptions o;
  o.micro_batch = 8;
  o.attention = models::Attention::Flash;
  const auto g = spec.build(o);
  for (const auto& l : g.layers)
    if (l.kind == models::LayerKind::Block) return l;
  throw std::runtime_error("no block");
}

// Llama 3 8B at micro-batch 1 (8,192 tokens), and its cross-entropy op.
models::ModelGraph llama_3_8b(models::Attention attention) {
  models::BuildOptions o;
  o.micro_batch = 1;
  o.attention = attention;
  return config::load_model_preset("llama-3-8b").build(o);
}

const models::Op* loss_op(const models::ModelGraph& g) {
  for (const auto& l : g.layers)
    for (const auto& op : l.ops)
      if (op.name == "cross_entropy") return &op;
  return nullptr;
}

}  // namespace

TEST(AttentionRates, Flash3AtHeadDim128CausalSeq8kIsThePublishedRate) {
  // attention.json attn-095: FlashAttention-3 forward, H100 SXM5, hd 128, causal, 8k: 602 TFLOP/s.
  EXPECT_DOUBLE_EQ(cost::flash_forward_tflops(cost::AttentionImpl::Flash3, 128, true, 8192), 602.0);
}

TEST(AttentionRates, BetweenPublishedLengthsLinearInLogSeq) {
  // FA2 hd128 causal: 2k 298, 4k 319 (attn-081, -082); halfway in log s is sqrt(2k x 4k).
  EXPECT_NEAR(cost::flash_forward_tflops(cost::AttentionImpl::Flash2, 128, true, std::sqrt(2048.0 * 4096.0)), 308.5, 1e-9);
  // Beyond the sweep: flat (16k: 335, attn-084).
  EXPECT_DOUBLE_EQ(cost::flash_forward_tflops(cost::AttentionImpl::Flash2, 128, true, 65536), 335.0);
}

TEST(AttentionRates, Flash2BackwardFromForwardAndForwardBackward) {
  // hd128 causal 8k: forward 333 (attn-083), forward + backward 308 (attn-178, 3.5x forward FLOPs).
  const double bwd = 2.5 / (3.5 / 308.0 - 1.0 / 333.0);
  EXPECT_NEAR(cost::flash_backward_tflops(cost::AttentionImpl::Flash2, 128, true, 8192), bwd, 1e-9);
}

TEST(Stack, FlashKernelPricedAtThePublishedRateWithCausalHalving) {
  auto d = config::load_device_profile("h100-sxm-80gb");
  d.stack = *cost::find_stack("default");
  d.stack.attention = cost::AttentionImpl::Flash3;
  models::Kernel f{"fa", models::KernelKind::Attention, 32, 8192, 8192, 128, 4.0 * 32 * 8192.0 * 8192.0 * 128, 0};
  f.role = models::KernelRole::FlashForward;
  f.causal = true;
  const double expect = f.flops / 2.0 / 602e12 + cost::launch_overhead(d, "bf16");
  EXPECT_NEAR(cost::quote_kernel(d, f, "bf16").seconds, expect, 1e-12);
}

// The A100 SXM4 profile prices the stack's attention from the A100's own published forward +
// backward rates (attention.json attn-223: FlashAttention-2, hd 128, causal, 2k: 155 TFLOP/s; the
// H100's attn-176: 265): a forward and its backward take what that figure says, not the H100 rate
// scaled by the peaks (312 / 989.4 TFLOP/s), which would be 1.86x slower.
TEST(Stack, A100FlashKernelsRunTheA100sPublishedForwardBackwardRate) {
  auto d = config::load_device_profile("a100-sxm-80gb");
  ASSERT_EQ(d.attention_tables, cost::AttentionTables::A100);
  d.stack = *cost::find_stack("default");
  d.stack.attention = cost::AttentionImpl::Flash2;
  const double fwd_flops = 4.0 * 128 * 2048.0 * 2048.0 * 128;  // batch x heads 8 x 16, as the figure's 16k tokens
  models::Kernel f{"fa", models::KernelKind::Attention, 128, 2048, 2048, 128, fwd_flops, 0};
  f.role = models::KernelRole::FlashForward;
  f.causal = true;
  models::Kernel b = f;
  b.role = models::KernelRole::FlashBackward;
  b.flops = 2.5 * fwd_flops;
  const double both = cost::quote_kernel(d, f, "bf16").seconds + cost::quote_kernel(d, b, "bf16").seconds -
                      2 * cost::launch_overhead(d, "bf16");
  EXPECT_NEAR(both, 3.5 * fwd_flops / 2.0 / 155e12, 1e-9 * both);
  EXPECT_NEAR(cost::a100_over_h100(cost::AttentionImpl::Flash2, 128, true, 2048), 155.0 / 265.0, 1e-12);
  // The standard attention (sdpa-math) by its own pair of figures: attn-217 32 against attn-170 57.
  EXPECT_NEAR(cost::a100_over_h100(cost::AttentionImpl::SdpaMath, 128, true, 2048), 32.0 / 57.0, 1e-12);
  // The H100 profile keeps the H100's tables.
  EXPECT_EQ(config::load_device_profile("h100-sxm-80gb").attention_tables, cost::AttentionTables::H100);
}

TEST(Stack, EagerElementwiseBytesOfOneGpt2BlockAreTheHandSum) {
  // T tokens, h hidden, f = 4h, e = 2, dropout on. Forward: norm 2eTh twice, dropout (2e+1)Th and
  // add 3eTh twice, GELU 2eTf. Backward: norm 3eTh + 2eTh twice, dropout (2e+1)Th and the
  // residual's gradient sum 3eTh twice, GELU 3eTf, four bias gradients reading dY:
  // eT(3h + h + f + h). In all 82 Th + 12 Tf bytes.
  const double T = 8 * 1024, h = 1600, f = 6400;
  double bytes = 0;
  int kernels = 0;
  const auto block = gpt2_xl_block();
  for (const auto& op : block.ops)
    for (const auto* pass : {&op.forward, &op.backward})
      for (const auto& k : *pass)
        for (double b : cost::element_plan(cost::Elementwise::Eager, k).passes) bytes += b, ++kernels;
  EXPECT_DOUBLE_EQ(bytes, 82 * T * h + 12 * T * f);
  // Forward 2 norms + 2 x (dropout, add) + GELU = 7; backward 2 x 2 norm kernels + 2 x (dropout,
  // sum) + GELU + 4 bias gradients = 13.
  EXPECT_EQ(kernels, 20);
}

TEST(Stack, CompiledKeepsTheFusedKernelsAndAddsTheTokenReductions) {
  // Inductor: the model's fused kernels stay; each norm's weight gradient (2eTh) and each bias
  // gradient (eT x outputs: 3h + h + f + h) are kernels of their own. 2 x 4Th + 2T(5h + f).
  const double T = 8 * 1024, h = 1600, f = 6400;
  double bytes = 0;
  int kept = 0, role_kernels = 0;
  for (const auto& op : gpt2_xl_block().ops)
    for (const auto* pass : {&op.forward, &op.backward})
      for (const auto& k : *pass) {
        const auto plan = cost::element_plan(cost::Elementwise::Compiled, k);
        for (double b : plan.passes) bytes += b;
        role_kernels += k.role != models::KernelRole::Plain;
        kept += plan.keep && k.role != models::KernelRole::Plain;
      }
  EXPECT_DOUBLE_EQ(bytes, 8 * T * h + 2 * T * (5 * h + f));
  EXPECT_EQ(kept, role_kernels);
}

// Inductor fuses a residual add without dropout into the norm that reads its sum: what remains of
// the add is 2e per element forward (both addends read, the sum written, beside the norm's own)
// and e backward (the skip connection's gradient read); with dropout the model's kernel stays.
TEST(Stack, CompiledFusesAResidualAddIntoTheNextNorm) {
  int residuals = 0;
  auto s = test::small_llama(1);
  const auto g = models::build_transformer(s, models::BuildOptions{});
  for (const auto& op : g.layers.at(1).ops)
    for (const auto* pass : {&op.forward, &op.backward})
      for (const auto& k : *pass) {
        if (k.role != models::KernelRole::ResidualForward && k.role != models::KernelRole::ResidualBackward) continue;
        ++residuals;
        const auto plan = cost::element_plan(cost::Elementwise::Compiled, k);
        EXPECT_FALSE(plan.keep);
        const double per_elem = k.role == models::KernelRole::ResidualForward ? 2 : 1;
        EXPECT_EQ(plan.passes, (std::vector<double>{per_elem * k.elem_bytes * k.elems}));
      }
  EXPECT_EQ(residuals, 4);  // after attention and after the MLP, each way
  for (const auto& op : gpt2_xl_block().ops)  // GPT-2's residual dropout
    for (const auto& k : op.forward)
      if (k.role == models::KernelRole::ResidualForward) {
        EXPECT_TRUE(cost::element_plan(cost::Elementwise::Compiled, k).keep);
      }
}

TEST(Stack, DispatchShowsOnlyWhenTheKernelIsShorter) {
  auto d = config::load_device_profile("h100-sxm-80gb");
  d.stack = *cost::find_stack("pytorch-eager");
  const double overhead = cost::launch_overhead(d, "bf16");
  models::Kernel tiny{"tiny", models::KernelKind::Memory, 1, 0, 0, 0, 0, 4096};
  models::Kernel big{"big", models::KernelKind::Memory, 1, 0, 0, 0, 0, 1e9};
  ASSERT_LT(cost::kernel_time(d, tiny, "bf16"), 7e-6);
  ASSERT_GT(cost::kernel_time(d, big, "bf16"), 7e-6);
  EXPECT_DOUBLE_EQ(cost::quote_kernel(d, tiny, "bf16").seconds, 7e-6 + overhead);
  EXPECT_DOUBLE_EQ(cost::quote_kernel(d, big, "bf16").seconds, cost::kernel_time(d, big, "bf16") + overhead);
}

// The default stack runs the model's own kernels, and a bias's gradient as autograd does: a
// reduction over tokens after the weight-gradient GEMM (Megatron-LM's layers), one streaming read
// of dY. Transformer Engine's presets sum it in the GEMM's epilogue instead.
TEST(Stack, DefaultStackIsTheUnstackedPriceButForBiasGradients) {
  auto d = config::load_device_profile("h100-sxm-80gb");
  EXPECT_TRUE(d.stack.is_default());
  int biases = 0;
  for (const auto& op : gpt2_xl_block().ops)
    for (const auto& k : op.backward) {
      const double unstacked = cost::quote_unstacked(d, k, "bf16").seconds;
      if (k.role != models::KernelRole::BiasWeightGrad) {
        EXPECT_EQ(cost::quote_kernel(d, k, "bf16").seconds, unstacked);
        continue;
      }
      ++biases;
      const models::Kernel sum{"bias sum", models::KernelKind::Memory, 1, 0, 0, 0, 0, k.elem_bytes * k.elems};
      EXPECT_DOUBLE_EQ(cost::quote_kernel(d, k, "bf16").seconds, unstacked + cost::quote_unstacked(d, sum, "bf16").seconds);
    }
  EXPECT_EQ(biases, 4);  // qkv, the projection, fc1, fc2
  d.stack = *cost::find_stack("megatron-te");
  for (const auto& op : gpt2_xl_block().ops)
    for (const auto& k : op.backward)
      if (k.role == models::KernelRole::BiasWeightGrad) {
        EXPECT_DOUBLE_EQ(cost::quote_kernel(d, k, "bf16").seconds, cost::quote_gemm(d, k, "bf16").seconds);
      }
}

TEST(Stack, NamingTheDefaultPresetChangesNothing) {
  const auto base = test::simulate_over_base(R"({"extends": "base.json", "simulation": {"backend": "analytical"}})");
  const auto named = test::simulate_over_base(R"({"extends": "base.json", "simulation": {"backend": "analytical"}, "stack": {"preset": "default"}})");
  EXPECT_EQ(base.step_time_s, named.step_time_s);
}

TEST(Stack, EagerStackSlowsTheStep) {
  const auto base = test::simulate_over_base(R"({"extends": "base.json", "simulation": {"backend": "analytical"}, "training": {"attention": "flash"}})");
  const auto eager = test::simulate_over_base(
      R"({"extends": "base.json", "simulation": {"backend": "analytical"}, "training": {"attention": "flash"},
          "stack": {"preset": "pytorch-eager"}})");
  EXPECT_GT(eager.step_time_s, base.step_time_s);
}

TEST(StackKey, RefusesAnUnknownPresetWithASuggestion) {
  const auto e = test::input_error_over_base(R"({"extends": "base.json", "stack": {"preset": "pytorch-eagr"}})");
  EXPECT_NE(e.find("/stack/preset"), std::string::npos) << e;
  EXPECT_NE(e.find("pytorch-eager"), std::string::npos) << e;
}

TEST(StackKey, RefusesAMisspeltKey) {
  const auto e = test::input_error_over_base(R"({"extends": "base.json", "stack": {"atention": "flash3"}})");
  EXPECT_NE(e.find("/stack/atention"), std::string::npos) << e;
  EXPECT_NE(e.find("attention"), std::string::npos) << e;
}

TEST(StackKey, RefusesAnUnknownAttentionAndFlashWithoutFusedAttention) {
  auto e = test::input_error_over_base(R"({"extends": "base.json", "training": {"attention": "flash"}, "stack": {"attention": "flash4"}})");
  EXPECT_NE(e.find("/stack/attention"), std::string::npos) << e;
  e = test::input_error_over_base(R"({"extends": "base.json", "stack": {"attention": "flash3"}})");
  EXPECT_NE(e.find("/stack/attention"), std::string::npos) << e;
  EXPECT_NE(e.find("training.attention"), std::string::npos) << e;
  e = test::input_error_over_base(R"({"extends": "base.json", "stack": {"elementwise": "lazy"}})");
  EXPECT_NE(e.find("/stack/elementwise"), std::string::npos) << e;
}

// eager-fp32 (torchtitan's F.cross_entropy(pred.float(), labels)): forward the cast (e + 4) and
// log_softmax (8), backward the zero fill (4), log_softmax_backward (12) and the cast back (4 +
// e), per logit; the first cast widens. Llama 3 8B's head at 8,192 tokens: n = 8,192 x 128,256 bf16 logits.
TEST(StackLoss, EagerFp32PassesAreTheHandSum) {
  const auto g = llama_3_8b(models::Attention::Standard);
  const models::Op* loss = loss_op(g);
  ASSERT_NE(loss, nullptr);
  ASSERT_EQ(loss->forward.size(), 1u);
  ASSERT_EQ(loss->backward.size(), 1u);
  const double n = 8192.0 * 128256.0;
  EXPECT_EQ(cost::loss_passes(cost::Loss::EagerFp32, loss->forward[0]), (std::vector<cost::MemoryPass>{{6 * n, true}, {8 * n}}));
  EXPECT_EQ(cost::loss_passes(cost::Loss::EagerFp32, loss->backward[0]), (std::vector<cost::MemoryPass>{{4 * n}, {12 * n}, {6 * n}}));
  EXPECT_TRUE(cost::loss_passes(cost::Loss::Fused, loss->forward[0]).empty());
  // The fused kernel the model prices: e + 4 per logit each way.
  EXPECT_DOUBLE_EQ(loss->forward[0].bytes, 6 * n);
  EXPECT_DOUBLE_EQ(loss->backward[0].bytes, 6 * n);
  // Only the loss's kernels carry the role.
  for (const auto& l : g.layers)
    for (const auto& op : l.ops)
      for (const auto& k : op.forward) {
        if (&op != loss) {
          EXPECT_TRUE(cost::loss_passes(cost::Loss::EagerFp32, k).empty()) << op.name;
        }
      }
}

// Inductor's cross-entropy: one reduction each way over the 16-bit logits, the forward at
// torch.compile's published rate for its row length (memory_bound.json mem-042, mem-043).
TEST(StackLoss, CompiledLossReadsTheLogitsAtInductorsPublishedRate) {
  const auto g = llama_3_8b(models::Attention::Flash);
  const models::Op* loss = loss_op(g);
  ASSERT_NE(loss, nullptr);
  EXPECT_EQ(loss->forward[0].n, 128256);  // the softmax's row
  const double n = 8192.0 * 128256.0;
  // 1,226 GB/s over 131K words, 1,700 over 32K, of the 2.97 TB/s the H100 streams at.
  EXPECT_NEAR(cost::compiled_forward_share(131072), 1226.0 / 2970.0, 1e-12);
  EXPECT_NEAR(cost::compiled_forward_share(32768), 1700.0 / 2970.0, 1e-12);
  EXPECT_NEAR(cost::compiled_forward_share(1000), 1700.0 / 2970.0, 1e-12);
  EXPECT_NEAR(cost::compiled_forward_share(std::sqrt(32768.0 * 131072.0)), (1700.0 + 1226.0) / 2 / 2970.0, 1e-12);
  const double share = cost::compiled_forward_share(128256);
  EXPECT_EQ(cost::loss_passes(cost::Loss::Compiled, loss->forward[0]), (std::vector<cost::MemoryPass>{{2 * n / share}}));
  EXPECT_EQ(cost::loss_passes(cost::Loss::Compiled, loss->backward[0]), (std::vector<cost::MemoryPass>{{4 * n}}));
  // On the H100 that forward takes what the compiled Llama step's profile timed, 1.44 ms, within
  // a fifth (a check: the published rate is 1.23 TB/s, that step's 1.46).
  auto d = config::load_device_profile("h100-sxm-80gb");
  d.stack = *cost::find_stack("torchtitan-compile");
  const double forward = cost::quote_kernel(d, loss->forward[0], "bf16").seconds;
  EXPECT_NEAR(forward, 1.44e-3, 0.2 * 1.44e-3);
}

// Each pass a kernel of its own on the memory-bound curve, at least the dispatch time.
TEST(StackLoss, EagerLossIsPricedAsItsKernels) {
  auto d = config::load_device_profile("h100-sxm-80gb");
  d.stack = *cost::find_stack("pytorch-eager");
  models::Kernel fwd{"cross_entropy", models::KernelKind::Memory, 1, 0, 0, 0, 0, 6e8};
  fwd.role = models::KernelRole::LossForward, fwd.elems = 1e8, fwd.elem_bytes = 2;
  const double overhead = cost::launch_overhead(d, "bf16");
  double expect = 0;
  for (double bytes : {6e8, 8e8}) {
    models::Kernel pass{"pass", models::KernelKind::Memory, 1, 0, 0, 0, 0, bytes};
    if (bytes == 6e8) pass.role = models::KernelRole::CastUp;  // the logits' .float(): at the cast-up rate
    expect += std::max(cost::kernel_time(d, pass, "bf16"), d.stack.dispatch_s) + overhead;
  }
  EXPECT_DOUBLE_EQ(cost::quote_kernel(d, fwd, "bf16").seconds, expect);
  d.stack.memory.loss = cost::Loss::Fused;  // the model's one kernel
  EXPECT_DOUBLE_EQ(cost::quote_kernel(d, fwd, "bf16").seconds, std::max(cost::kernel_time(d, fwd, "bf16"), d.stack.dispatch_s) + overhead);
}

// pytorch-eager runs torchtitan's fp32 loss, the torchtitan presets compile it; llm-foundry's MPT
// its fused_crossentropy; the key overrides the preset and refuses what it does not know.
TEST(StackLoss, PresetsAndKey) {
  EXPECT_EQ(cost::find_stack("pytorch-eager")->memory.loss, cost::Loss::EagerFp32);
  for (const char* compiled : {"torchtitan-compile", "torchtitan-async-tp"})
    EXPECT_EQ(cost::find_stack(compiled)->memory.loss, cost::Loss::Compiled) << compiled;
  for (const char* fused : {"default", "llm-foundry", "megatron-te", "deepspeed"})
    EXPECT_EQ(cost::find_stack(fused)->memory.loss, cost::Loss::Fused) << fused;
  const auto eager = test::simulate_over_base(
      R"({"extends": "base.json", "simulation": {"backend": "analytical"}, "training": {"attention": "flash"},
          "stack": {"preset": "pytorch-eager"}})");
  const auto fused = test::simulate_over_base(
      R"({"extends": "base.json", "simulation": {"backend": "analytical"}, "training": {"attention": "flash"},
          "stack": {"preset": "pytorch-eager", "loss": "fused"}})");
  EXPECT_GT(eager.step_time_s, fused.step_time_s);
  test::expect_parts_sum_to_step(eager);
  const auto e = test::input_error_over_base(R"({"extends": "base.json", "stack": {"loss": "eager"}})");
  EXPECT_NE(e.find("/stack/loss"), std::string::npos) << e;
  EXPECT_NE(e.find("eager-fp32"), std::string::npos) << e;
}

TEST(StackBatchNorm, EagerRunsItsFourKernelsAtTheProfilesRates) {
  // 1e8 bf16 elements (x: 200 MB) at 500, 2000, 2500 and 2600 GB/s: forward 0.2 GB of statistics
  // then 0.4 GB of transform; backward 0.4 GB of reduction then 0.6 GB of input gradient.
  auto d = config::load_device_profile("h200-sxm-141gb");
  d.eager_batch_norm = cost::BatchNormRates{500e9, 2000e9, 2500e9, 2600e9};
  models::Kernel k;
  k.kind = models::KernelKind::Memory;
  k.role = models::KernelRole::BatchNormForward;
  k.elems = 1e8;
  k.elem_bytes = 2;
  const auto f = cost::batch_norm_seconds(d, cost::Elementwise::Eager, k);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_DOUBLE_EQ(f[0], 0.2e9 / 500e9);
  EXPECT_DOUBLE_EQ(f[1], 0.4e9 / 2000e9);
  k.role = models::KernelRole::BatchNormBackward;
  const auto b = cost::batch_norm_seconds(d, cost::Elementwise::Eager, k);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_DOUBLE_EQ(b[0], 0.4e9 / 2500e9);
  EXPECT_DOUBLE_EQ(b[1], 0.6e9 / 2600e9);
  // The stack prices them as two kernels each, at least its dispatch time, plus the launch.
  d.stack = *cost::find_stack("pytorch-eager");
  const double overhead = cost::launch_overhead(d, "bf16");
  EXPECT_NEAR(cost::quote_stacked(d, k, "bf16").seconds,
              std::max(b[0], d.stack.dispatch_s) + std::max(b[1], d.stack.dispatch_s) + 2 * overhead, 1e-15);
  // A fused stack keeps the model's own kernel.
  EXPECT_TRUE(cost::batch_norm_seconds(d, cost::Elementwise::Fused, k).empty());
}
