// Memory as the software stack keeps it (issue 30, item 3; docs/memory.md): each framework's
// optimizer buffers against the closed form its source gives, FP8 weight copies only where the
// stack keeps them, and the allocator's reserve.
#include <gtest/gtest.h>

#include "sim/config/scenario.hpp"
#include "scenario_helpers.hpp"
#include "sim/results/result.hpp"
#include "reports/reports.hpp"
#include "sim/config/build_options.hpp"
#include "strategies/plan.hpp"
#include "strategies/stack_memory.hpp"
#include "strategies/works.hpp"

using namespace dtsim;
using strategies::Framework;
using strategies::Precision;
using strategies::StateBuffers;

namespace {

const std::string kRoot = DTSIM_SOURCE_DIR;
constexpr double kB = 1e9;  // one billion parameters
const auto kAdam = models::OptimizerKind::Adam;

strategies::MemoryBreakdown from_source(Framework f, Precision p, int zero, int dp) {
  return strategies::stack_state_memory(kB, p, kAdam, zero, dp, f, StateBuffers::Framework);
}

results::Result analytical(config::Scenario s) {
  s.backend = config::Backend::Analytical;
  return results::simulate(s, false);
}

}  // namespace

TEST(StackMemory, DeepSpeedZero1Bf16On8GpusKeeps2Plus2Plus12Over8) {
  // stage_1_and_2.py: bf16 weights and .grad whole; fp32 master, m and v sharded.
  const auto m = from_source(Framework::DeepSpeed, Precision::Bf16, 1, 8);
  EXPECT_DOUBLE_EQ(m.params, 2 * kB);
  EXPECT_DOUBLE_EQ(m.gradients, 2 * kB);
  EXPECT_DOUBLE_EQ(m.optimizer, 12 * kB / 8);
}

TEST(StackMemory, DeepSpeedBf16OptimizerKeepsAWholeFp32GradientBuffer) {
  // bf16_optimizer.py: fp32_groups_gradients_flat is zeros_like the whole flat bf16 weights, in
  // fp32; fp32 master and Adam state on this rank's partition only.
  const auto m = from_source(Framework::DeepSpeed, Precision::Bf16, 0, 8);
  EXPECT_DOUBLE_EQ(m.params, 2 * kB);
  EXPECT_DOUBLE_EQ(m.gradients, 4 * kB);
  EXPECT_DOUBLE_EQ(m.optimizer, 12 * kB / 8);
  // fp16 without ZeRO is FP16_Optimizer: the ZeRO paper's 2 + 2 + 12, nothing sharded.
  EXPECT_DOUBLE_EQ(from_source(Framework::DeepSpeed, Precision::Fp16, 0, 8).peak(), 16 * kB);
}

TEST(StackMemory, DeepSpeedZero2And3ShardGradientsAndKeepOneReduceBucket) {
  EXPECT_DOUBLE_EQ(from_source(Framework::DeepSpeed, Precision::Bf16, 2, 8).gradients, 2 * kB / 8);
  EXPECT_DOUBLE_EQ(from_source(Framework::DeepSpeed, Precision::Bf16, 3, 8).peak(), 16 * kB / 8);
  const auto ds = strategies::framework_defaults(Framework::DeepSpeed);  // reduce_bucket_size 5e8
  EXPECT_DOUBLE_EQ(strategies::state_bucket_bytes(Precision::Bf16, 2, ds, StateBuffers::Framework), 1e9);
  EXPECT_DOUBLE_EQ(strategies::state_bucket_bytes(Precision::Bf16, 1, ds, StateBuffers::Framework), 0);
  EXPECT_DOUBLE_EQ(strategies::state_bucket_bytes(Precision::Bf16, 3, ds, StateBuffers::ZeroPaper), 0);
}

TEST(StackMemory, MegatronMatchesItsDistributedOptimizerTable) {
  // docs/user-guide/features/dist_optimizer.md: bf16 18 or 6 + 12/d; fp16 20 or 4 + 16/d;
  // fp32 16 or 8 + 8/d bytes per parameter.
  EXPECT_DOUBLE_EQ(from_source(Framework::MegatronLM, Precision::Bf16, 0, 8).peak(), 18 * kB);
  EXPECT_DOUBLE_EQ(from_source(Framework::MegatronLM, Precision::Bf16, 1, 8).peak(), 6 * kB + 12 * kB / 8);
  EXPECT_DOUBLE_EQ(from_source(Framework::MegatronLM, Precision::Fp16, 0, 8).peak(), 20 * kB);
  EXPECT_DOUBLE_EQ(from_source(Framework::MegatronLM, Precision::Fp16, 1, 8).peak(), 4 * kB + 16 * kB / 8);
  EXPECT_DOUBLE_EQ(from_source(Framework::MegatronLM, Precision::Fp32, 0, 8).peak(), 16 * kB);
  EXPECT_DOUBLE_EQ(from_source(Framework::MegatronLM, Precision::Fp32, 1, 8).peak(), 8 * kB + 8 * kB / 8);
  EXPECT_DOUBLE_EQ(from_source(Framework::MegatronLM, Precision::Bf16, 1, 8).gradients, 4 * kB);  // fp32 main grads
}

TEST(StackMemory, FsdpKeepsFp32ShardsAndNoMasterCopy) {
  const auto m = from_source(Framework::Fsdp, Precision::Bf16, 3, 8);
  EXPECT_DOUBLE_EQ(m.params, 4 * kB / 8);
  EXPECT_DOUBLE_EQ(m.gradients, 4 * kB / 8);
  EXPECT_DOUBLE_EQ(m.optimizer, 8 * kB / 8);
  EXPECT_DOUBLE_EQ(m.peak(), strategies::model_state_memory(kB, Precision::Bf16, kAdam, 3, 8).peak());
}

TEST(StackMemory, ZeroPaperIsTheDefaultForEveryFramework) {
  EXPECT_EQ(strategies::StackMemory{}.buffers, StateBuffers::ZeroPaper);
  for (auto f : {Framework::MegatronLM, Framework::DeepSpeed, Framework::Fsdp})
    for (int zero = 0; zero <= 3; ++zero) {
      const auto a = strategies::stack_state_memory(kB, Precision::Bf16, kAdam, zero, 8, f, StateBuffers::ZeroPaper);
      const auto b = strategies::model_state_memory(kB, Precision::Bf16, kAdam, zero, 8);
      EXPECT_EQ(a.params, b.params);
      EXPECT_EQ(a.gradients, b.gradients);
      EXPECT_EQ(a.optimizer, b.optimizer);
    }
}

TEST(StackMemory, MegatronTeStackKeepsFp32MainGradients) {
  // Llama 3 8B, ZeRO-1 (Megatron's distributed optimizer) over 16 A100s: the gradients double.
  auto s = config::load_scenario(kRoot + "/scenarios/zero/llama-3-8b-zero1.json");
  const auto before = analytical(s);
  s.training.memory.buffers = StateBuffers::Framework;
  const auto after = analytical(s);
  EXPECT_DOUBLE_EQ(after.memory.gradients, 2 * before.memory.gradients);
  EXPECT_DOUBLE_EQ(after.memory.params, before.memory.params);
  EXPECT_DOUBLE_EQ(after.memory.optimizer, before.memory.optimizer);
}

TEST(StackMemory, NoFp8WeightCopiesWhereTheStackKeepsNone) {
  // Llama 3 70B in FP8 on 64 H100s: Transformer Engine's copy and transpose are 2 bytes per FP8
  // weight; a stack that casts per use (torchao Float8, FP8 all-gather under FSDP2) keeps none.
  auto s = config::load_scenario(kRoot + "/scenarios/fp8/llama-3-70b-h100-fp8.json");
  auto bf16 = s;
  bf16.training.precision = Precision::Bf16;
  const auto te = analytical(s);
  s.training.memory.fp8_weight_copies = strategies::Fp8WeightCopies::None;
  const auto none = analytical(s);
  EXPECT_DOUBLE_EQ(none.memory.params, analytical(bf16).memory.params);
  EXPECT_GT(te.memory.params - none.memory.params, 0.5 * none.memory.params);  // most weights are GEMMs'
}

// Megatron's --fp8-param-gather: the FP8 weight and its transpose (1 + 1 bytes) replace the bf16
// weight, the distributed optimizer gathers them in FP8 (1 byte), and the step only rebuilds the
// transposes (read 1, write 1) where Transformer Engine casts and transposes (read 2, write 2).
TEST(StackMemory, Fp8ParamsReplaceTheBf16WeightsAndAreGatheredInFp8) {
  auto s = config::load_scenario(kRoot + "/scenarios/fp8/llama-3-70b-h100-fp8.json");
  s.backend = config::Backend::Analytical;
  s.parallelism.zero_stage = 1;
  auto bf16 = s;
  bf16.training.precision = Precision::Bf16;
  s.training.memory.fp8_weight_copies = strategies::Fp8WeightCopies::Fp8Params;
  const auto fp8 = analytical(s), plain = analytical(bf16);
  EXPECT_DOUBLE_EQ(fp8.memory.params, plain.memory.params);
  // One gather per stage: together short by one byte per FP8 GEMM weight of every stage.
  auto gathered = [](const results::Result& r) {
    double bytes = 0;
    for (const auto& t : r.plan.graph.tasks) bytes += t.label() == "zero gather params" ? t.collective().bytes : 0.0;
    return bytes;
  };
  const auto g = s.model.build(config::build_options(s));
  const auto k = strategies::plan_layout(g, s.parallelism, s.training, s.host).layout;
  double fp8_params = 0;
  for (int st = 0; st < s.parallelism.pipeline; ++st) fp8_params += strategies::fp8_weight_params(k.stage_layers(st));
  ASSERT_GT(fp8_params, 0.0);
  EXPECT_NEAR(gathered(fp8), gathered(plain) - fp8_params, 1e-9 * gathered(plain));
  EXPECT_DOUBLE_EQ(strategies::fp8_weight_cast_kernel(1e9, strategies::Fp8WeightCopies::Fp8Params).bytes, 2e9);
  EXPECT_DOUBLE_EQ(strategies::fp8_weight_cast_kernel(1e9, strategies::Fp8WeightCopies::CopyAndTranspose).bytes, 4e9);
}

TEST(StackMemory, Fp8ParamsNeedFp8AndNoZero3) {
  auto e = test::input_error_over_base(R"({"extends": "base.json", "stack": {"fp8_weight_copies": "fp8-params"}})");
  EXPECT_NE(e.find("/stack/fp8_weight_copies"), std::string::npos) << e;
  EXPECT_NE(e.find("precision"), std::string::npos) << e;
  e = test::input_error_over_base(R"({"extends": "base.json", "training": {"precision": "fp8"}, "parallelism": {"zero_stage": 3},
                                       "hardware": {"device": "h100-sxm-80gb"}, "stack": {"fp8_weight_copies": "fp8-params"}})");
  EXPECT_NE(e.find("ZeRO-3"), std::string::npos) << e;
  e = test::input_error_over_base(R"({"extends": "base.json", "stack": {"fp8_weight_copies": "fp8-param"}})");
  EXPECT_NE(e.find("fp8-params"), std::string::npos) << e;
}

TEST(StackMemory, ExpandableSegmentsKeepOnePagePerPoolAndNoneKeepsNothing) {
  const strategies::Checkpoints c;
  EXPECT_DOUBLE_EQ(strategies::allocator_slack(strategies::Allocator::PytorchExpandable, {}, c, {}), 22.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(strategies::allocator_slack(strategies::Allocator::None, {}, c, {}), 0);
}

TEST(StackMemory, ReservedPeakDecidesWhetherItFits) {
  // Llama 3 8B ZeRO-1 on 16 A100s under the caching allocator: what it caches beyond the
  // allocated peak counts against the device, so a device with room for the tensors alone but
  // not the cache does not fit.
  auto s = config::load_scenario(kRoot + "/scenarios/zero/llama-3-8b-zero1.json");
  s.training.memory.buffers = StateBuffers::Framework;
  const auto plain = analytical(s);
  EXPECT_TRUE(plain.fits);
  EXPECT_EQ(plain.allocator_slack, 0);
  s.training.memory.allocator = strategies::Allocator::PytorchCaching;
  const auto cached = analytical(s);
  EXPECT_DOUBLE_EQ(cached.memory.peak(), plain.memory.peak());  // allocated bytes unchanged
  EXPECT_GT(cached.allocator_slack, 0);
  EXPECT_DOUBLE_EQ(cached.device_peak(), cached.memory.peak() + cached.allocator_slack);
  EXPECT_TRUE(cached.fits);
  s.device.memory_bytes = cached.memory.peak() + cached.allocator_slack / 2;
  EXPECT_FALSE(analytical(s).fits);
  s.training.memory.allocator = strategies::Allocator::PytorchExpandable;
  EXPECT_TRUE(analytical(s).fits);
}

TEST(StackMemoryKey, PresetsSetAndKeysOverride) {
  const std::string flash = R"("simulation": {"backend": "analytical"}, "training": {"attention": "flash"})";
  auto titan = test::simulate_over_base(R"({"extends": "base.json", )" + flash + R"(, "stack": {"preset": "torchtitan-compile"}})");
  EXPECT_EQ(titan.scenario_spec.training.memory.allocator, strategies::Allocator::PytorchExpandable);
  EXPECT_EQ(titan.scenario_spec.training.memory.fp8_weight_copies, strategies::Fp8WeightCopies::None);
  EXPECT_EQ(titan.scenario_spec.training.memory.buffers, StateBuffers::Framework);
  auto over = test::simulate_over_base(R"({"extends": "base.json", )" + flash +
                                       R"(, "stack": {"preset": "pytorch-eager", "allocator": "none", "buffers": "zero-paper"}})");
  EXPECT_EQ(over.scenario_spec.training.memory.allocator, strategies::Allocator::None);
  EXPECT_EQ(over.scenario_spec.training.memory.buffers, StateBuffers::ZeroPaper);
  const auto plain = test::simulate_over_base(R"({"extends": "base.json", "simulation": {"backend": "analytical"}})");
  EXPECT_EQ(plain.scenario_spec.training.memory.allocator, strategies::Allocator::None);
  EXPECT_EQ(plain.scenario_spec.training.memory.buffers, StateBuffers::ZeroPaper);
}

TEST(StackMemoryKey, RefusesAnUnknownAllocatorWithASuggestion) {
  const auto e = test::input_error_over_base(R"({"extends": "base.json", "stack": {"allocator": "pytorch-expandible"}})");
  EXPECT_NE(e.find("/stack/allocator"), std::string::npos) << e;
  EXPECT_NE(e.find("pytorch-expandable"), std::string::npos) << e;
}

TEST(StackMemory, ResultNamesTheAllocatorsPeaksOnlyWhereTheStackHasOne) {
  auto s = config::load_scenario(kRoot + "/scenarios/zero/llama-3-8b-zero1.json");
  const auto plain = results::to_json(analytical(s), false);
  EXPECT_FALSE(plain["memory"].contains("reserved_peak_bytes"));
  EXPECT_FALSE(plain["memory"].contains("allocator"));
  s.training.memory.allocator = strategies::Allocator::PytorchExpandable;
  const auto r = analytical(s);
  const auto j = results::to_json(r, false);
  EXPECT_EQ(j["memory"]["allocator"], "pytorch-expandable");
  const double allocated = j["memory"]["allocated_peak_bytes"].get<double>();
  EXPECT_NEAR(allocated, r.memory.peak() - s.reserved_bytes, 1);
  EXPECT_NEAR(j["memory"]["reserved_peak_bytes"].get<double>(), allocated + 22.0 * 1024 * 1024, 1);
  EXPECT_NEAR(j["memory"]["device_peak_bytes"].get<double>(), r.memory.peak() + 22.0 * 1024 * 1024, 1);
  EXPECT_EQ(j["memory"]["peak_bytes"], plain["memory"]["peak_bytes"]);  // the allocated figure, as before
}

TEST(StackMemory, SummaryShowsTheAllocatorsCacheAndWhatPytorchReads) {
  auto s = config::load_scenario(kRoot + "/scenarios/zero/llama-3-8b-zero1.json");
  EXPECT_EQ(reports::summary(analytical(s)).find("allocator"), std::string::npos);
  s.training.memory.buffers = StateBuffers::Framework;  // 71.5 GiB allocated, as above
  s.training.memory.allocator = strategies::Allocator::PytorchCaching;
  const auto r = analytical(s);
  s.device.memory_bytes = r.memory.peak() + r.allocator_slack / 2;  // the tensors fit, the cache does not
  const auto text = reports::summary(analytical(s));
  EXPECT_NE(text.find("allocator cache"), std::string::npos) << text;
  EXPECT_NE(text.find("max_memory_reserved"), std::string::npos) << text;
  EXPECT_NE(text.find("DOES NOT FIT"), std::string::npos) << text;
}

TEST(StackMemory, FewestGpusThatFitCountTheAllocatorsCache) {
  // Llama 3 8B without ZeRO does not fit 16 A100s; the search for the fewest GPUs that hold it
  // asks the same question as `fits`: with the caching allocator's cache, the answer holds it.
  auto s = config::load_scenario(kRoot + "/scenarios/zero/llama-3-8b-zero0.json");
  s.backend = config::Backend::Analytical;
  s.training.memory.buffers = StateBuffers::Framework;
  const auto plain = results::simulate(s);
  s.training.memory.allocator = strategies::Allocator::PytorchCaching;
  const auto cached = results::simulate(s);
  ASSERT_TRUE(plain.fewest_fit && cached.fewest_fit);
  EXPECT_GE(cached.fewest_fit->gpus, plain.fewest_fit->gpus);
  // The shape it found, planned in full: the device peak it holds, cache included, is the fit's.
  const auto& fit = *cached.fewest_fit;
  config::Scenario f = s;
  f.cluster.nodes = fit.gpus / 8;
  f.parallelism.data = fit.data, f.parallelism.tensor = fit.tensor, f.parallelism.pipeline = fit.pipeline;
  f.parallelism.zero_stage = fit.zero_stage, f.parallelism.recompute = fit.recompute;
  const auto r = results::memory_only(f);
  EXPECT_TRUE(r.fits);
  EXPECT_GT(r.allocator_slack, 0);
  EXPECT_NEAR(r.device_peak(), fit.peak_bytes, 1e-6 * fit.peak_bytes);
}

TEST(StackMemory, WorstGpuIsTheOneThatHoldsTheMostCacheIncluded) {
  // Pipeline stages differ in activations (1F1B: the first keeps the most micro-batches) and in
  // weights (embedding, head): the GPU reported is the one whose device peak is highest.
  auto s = config::load_scenario(kRoot + "/scenarios/pipeline/gpt3-175b-1f1b.json");
  s.training.memory.allocator = strategies::Allocator::PytorchCaching;
  const auto r = results::memory_only(s);
  ASSERT_GT(r.plan.stage_memory.size(), 1u);
  ASSERT_EQ(r.plan.stage_allocator_slack.size(), r.plan.stage_memory.size());
  double most = 0;
  for (std::size_t i = 0; i < r.plan.stage_memory.size(); ++i)
    most = std::max(most, r.plan.stage_memory[i].peak() + s.reserved_bytes + r.plan.stage_allocator_slack[i]);
  EXPECT_NEAR(r.device_peak(), most, 1e-9 * most);
}

namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

config::Scenario llama_4_layers() {
  return config::load_scenario(kRoot + "/scenarios/gpu_check/llama3-8b-tp1-4layers-1gpu.json");
}

}  // namespace

TEST(StackMemory, EagerLossBackwardHoldsTwoFp32GradientsBesideItsOutput) {
  // Llama 3 8B's 4 layers on one H100, 8,192 tokens x 128,256 words, no recomputation: eager
  // PyTorch's nll_loss and log_softmax gradients (4 + 4 bytes a logit) beside the kept output.
  auto s = llama_4_layers();
  const auto fused = results::memory_only(s);
  s.training.memory.loss = strategies::Loss::EagerFp32;
  const auto eager = results::memory_only(s);
  const double logits = 8192.0 * 128256;
  EXPECT_NEAR(eager.memory.activations - fused.memory.activations, 8 * logits, 1);
  EXPECT_DOUBLE_EQ(eager.memory.gradients, fused.memory.gradients);
  // Compiled keeps the 16-bit logits (2 bytes, not the fp32 softmax's 4) and writes a 16-bit
  // gradient beside them: the same peak here. Under full recomputation the rebuilt block comes
  // after that gradient is freed, so only the larger of the two counts: up to 2 bytes a logit less.
  s.training.memory.loss = strategies::Loss::Compiled;
  EXPECT_NEAR(results::memory_only(s).memory.activations, fused.memory.activations, 1);
  s.parallelism.recompute = strategies::Recompute::Full;
  const auto full = results::memory_only(s);
  s.training.memory.loss = strategies::Loss::Fused;
  const double fused_full = results::memory_only(s).memory.activations;
  EXPECT_LT(full.memory.activations, fused_full);
  EXPECT_GE(full.memory.activations, fused_full - 2 * logits);
}

TEST(StackMemory, GradientsFreedBetweenStepsAreNotHeldAtTheFirstBackward) {
  // One micro-batch: the activation peak comes before backward allocates any gradient.
  auto s = llama_4_layers();
  const auto held = results::memory_only(s);
  ASSERT_GT(held.memory.gradients, 0);
  s.training.memory.gradients_set_to_none = true;
  const auto freed = results::memory_only(s);
  EXPECT_EQ(freed.memory.gradients, 0);
  EXPECT_NEAR(freed.memory.peak(), held.memory.peak() - held.memory.gradients, 1);
  test::expect_parts_sum_to_step(analytical(s));
  // Two micro-batches: the second forward runs with the first's gradients held.
  s.training.global_batch *= 2;
  EXPECT_DOUBLE_EQ(results::memory_only(s).memory.gradients, held.memory.gradients);
  // Gradients larger than the activations: the peak is the end of backward, all gradients held.
  s = llama_4_layers();
  s.training.memory.gradients_set_to_none = true;
  s.parallelism.recompute = strategies::Recompute::Full;
  s.model = config::load_model_preset("llama-3-8b");  // 32 layers, 8 billion parameters
  s.device.memory_bytes = 1e15;
  const auto big = results::memory_only(s);
  EXPECT_GT(big.memory.gradients, 0);
  EXPECT_EQ(big.memory.activations, 0);
}

TEST(StackMemory, AllocatedPeaksOfTheH100StepsUnderTheirStacks) {
  // A check, not a fit: this project's own H100 steps (docs/gpu_check.md), eager and compiled,
  // under pytorch-eager and torchtitan-compile. Before the loss's tensors and freed gradients
  // were modelled the compiled peaks were 3-22 % high.
  for (const char* name : {"gpt2-xl", "llama3-8b-tp1-4layers", "llama3-8b-tp8-slice", "resnet50"})
    for (const char* mode : {"eager", "compiled"}) {
      const auto s = config::load_scenario(kRoot + "/scenarios/validation/h100-pytorch/" + name + "-" + mode + ".json");
      ASSERT_TRUE(s.reference && s.reference->memory_reading == "allocated");
      const auto r = results::memory_only(s);
      const double allocated = r.memory.peak() - s.reserved_bytes;
      EXPECT_NEAR(allocated / kGiB, s.reference->peak_memory_bytes / kGiB, 0.04 * s.reference->peak_memory_bytes / kGiB)
          << name << " " << mode;
    }
}

TEST(StackResult, ResultJsonStatesTheStackThatRanOnlyWhereOneIsNamed) {
  const auto plain = results::to_json(analytical(config::load_scenario(kRoot + "/scenarios/zero/llama-3-8b-zero1.json")), false);
  EXPECT_FALSE(plain.contains("stack"));
  const auto j = results::to_json(analytical(config::load_scenario(kRoot + "/scenarios/memory/llama-3-8b-fsdp-eager.json")), false);
  ASSERT_TRUE(j.contains("stack"));
  const auto& st = j["stack"];
  EXPECT_EQ(st["preset"], "pytorch-eager");
  EXPECT_EQ(st["loss"], "eager-fp32");
  EXPECT_EQ(st["attention"], "sdpa-flash");  // SDPA's own FlashAttention-2
  EXPECT_EQ(st["gather_copies"], "copy-out");  // framework fsdp: FSDP2's copy-out applies
  EXPECT_EQ(st["allocator"], "pytorch-caching");
  EXPECT_EQ(st["gradients_set_to_none"], true);
  EXPECT_EQ(st["zero3_reduce_bytes_per_gradient"], 4);
  EXPECT_GT(st["comm_sms"].get<int>(), 0);  // the device's NCCL SMs, resolved
}
