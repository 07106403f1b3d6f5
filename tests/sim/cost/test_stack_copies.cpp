// The stack's copies around fused attention (stack.copies, sim/cost/attention_copies.cpp): the
// bytes of each kernel by hand for the small Llama, GPT-2's backward cat, the presets, the key.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "llama_spec.hpp"
#include "scenario_helpers.hpp"
#include "sim/config/scenario.hpp"
#include "sim/cost/attention_copies.hpp"
#include "sim/cost/roofline.hpp"
#include "sim/cost/stack.hpp"
#include "sim/results/result.hpp"

using namespace dtsim;

namespace {

// The fused attention op of the first block.
models::Op flash_op(const models::TransformerSpec& s, const models::BuildOptions& o) {
  const auto g = models::build_transformer(s, o);
  for (const auto& l : g.layers)
    for (const auto& op : l.ops)
      if (op.name == "flash_attention") return op;
  throw std::runtime_error("no flash attention");
}

models::BuildOptions flash_options() {
  models::BuildOptions o;
  o.attention = models::Attention::Flash;
  return o;
}

double sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }
// The passes' bytes, and which of them cast up.
std::vector<double> bytes_of(const std::vector<cost::MemoryPass>& passes) {
  std::vector<double> out;
  for (const auto& p : passes) out.push_back(p.bytes);
  return out;
}
std::vector<bool> casts_up(const std::vector<cost::MemoryPass>& passes) {
  std::vector<bool> out;
  for (const auto& p : passes) out.push_back(p.cast_up);
  return out;
}

// Two Llama 3 layers on one H100, flash attention, analytical.
constexpr const char* kLlama = R"({
  "schema_version": 1, "name": "llama-copies",
  "model": {"preset": "llama-3-8b", "num_layers": 2},
  "hardware": {"device": "h100-sxm-80gb"},
  "cluster": {"nodes": 1, "gpus_per_node": 1,
              "intra_node": {"bandwidth_GBps": 450, "latency_us": 1},
              "inter_node": {"nics_per_node": 1, "nic_bandwidth_GBps": 50, "latency_us": 5}},
  "parallelism": {"data": 1, "micro_batch_size": 1},
  "training": {"global_batch_size": 1, "precision": "bf16", "attention": "flash", "optimizer": "adam"},
  "simulation": {"backend": "analytical"}
})";

}  // namespace

// The small Llama (tests/llama_spec.hpp: 16 heads, 4 KV heads, head dim 64, 512 tokens), bf16:
// Q = 512 x 16 x 64 = 524,288 elements, K = V = 512 x 4 x 64 = 131,072, the RoPE table 512 x 32
// complex64 = 131,072 bytes. Forward: the fused QKV split's three copies (2e each: 2,097,152,
// 524,288, 524,288), then per tensor the cast up (e + 4), the complex multiply (8 + the table)
// and the cast back (4 + e): q 3,145,728, 4,325,376, 3,145,728; k 786,432, 1,179,648, 786,432.
// Backward: the same six, then the split's cat of dq, dk, dv (2e x 786,432 = 3,145,728).
TEST(StackCopies, EagerPassesOfTheSmallLlamaAreTheHandSum) {
  const auto fa = flash_op(test::small_llama(2), flash_options());
  const std::vector<double> rope{3145728, 4325376, 3145728, 786432, 1179648, 786432};
  std::vector<double> forward{2097152, 524288, 524288};
  forward.insert(forward.end(), rope.begin(), rope.end());
  std::vector<double> backward = rope;
  backward.push_back(3145728);
  EXPECT_EQ(bytes_of(cost::copy_passes(cost::Copies::Eager, fa.forward.front())), forward);
  // x.float() of q and of k widens, forward and backward (type_as's backward).
  const std::vector<bool> rope_up{true, false, false, true, false, false};
  std::vector<bool> forward_up{false, false, false};
  forward_up.insert(forward_up.end(), rope_up.begin(), rope_up.end());
  EXPECT_EQ(casts_up(cost::copy_passes(cost::Copies::Eager, fa.forward.front())), forward_up);
  std::vector<bool> backward_up = rope_up;
  backward_up.push_back(false);
  EXPECT_EQ(casts_up(cost::copy_passes(cost::Copies::Eager, fa.backward.front())), backward_up);
  EXPECT_EQ(bytes_of(cost::copy_passes(cost::Copies::Eager, fa.backward.front())), backward);
  // 16.5 MB each way per layer and micro-batch: 2e(Q + 2K) + (2e + 16)(Q + K) + 2 x table.
  EXPECT_DOUBLE_EQ(sum(forward), 16515072.0);
  EXPECT_DOUBLE_EQ(sum(backward), 16515072.0);
  EXPECT_TRUE(cost::copy_passes(cost::Copies::Fused, fa.forward.front()).empty());
}

// The same small Llama with HF's rotate-half RoPE (as scripts/gpu_train.py runs it): per tensor of
// n elements 10e n forward in five kernels and 15e n backward in nine, 2.5 n and 3.5 n of them on
// the scalar path; no copies of q, k, v forward, the split's cat backward.
TEST(StackCopies, RotateHalfPassesOfTheSmallLlamaAreTheHandSum) {
  const auto fa = flash_op(test::small_llama(2), flash_options());
  const double q = 524288, k = 131072, e = 2;
  auto totals = [](const std::vector<cost::MemoryPass>& passes) {
    double bytes = 0, scalar = 0;
    for (const auto& p : passes) bytes += p.bytes, scalar += p.unvectorised_elems;
    return std::pair{bytes, scalar};
  };
  const auto f = cost::copy_passes(cost::Copies::RotateHalf, fa.forward.front());
  const auto b = cost::copy_passes(cost::Copies::RotateHalf, fa.backward.front());
  ASSERT_EQ(f.size(), 10u);
  ASSERT_EQ(b.size(), 19u);
  EXPECT_DOUBLE_EQ(totals(f).first, 10 * e * (q + k));
  EXPECT_DOUBLE_EQ(totals(f).second, 2.5 * (q + k));
  EXPECT_DOUBLE_EQ(totals(b).first, 15 * e * (q + k) + 2 * e * (q + 2 * k));
  EXPECT_DOUBLE_EQ(totals(b).second, 3.5 * (q + k));
  const auto err = test::input_error_over_base(R"({"extends": "base.json", "stack": {"copies": "eager-rotate-half"}})");
  EXPECT_NE(err.find("/stack/copies"), std::string::npos) << err;  // needs training.attention flash
  EXPECT_NE(err.find("eager-rotate-half"), std::string::npos) << err;
}

// Tensor parallelism 4: each rank's 4 query heads and 1 KV head; an unbalanced context split's
// extra attention work is waiting and runs no copies of its own.
TEST(StackCopies, EachRankCopiesItsOwnHeadsAndTokens) {
  auto o = flash_options();
  o.tensor = 4;
  const auto fa = flash_op(test::small_llama(1), o);
  const double q = 512.0 * 4 * 64, k = 512.0 * 64, table = 4.0 * 512 * 64;
  EXPECT_EQ(bytes_of(cost::copy_passes(cost::Copies::Eager, fa.forward.front())),
            (std::vector<double>{4 * q, 4 * k, 4 * k, 6 * q, 8 * q + table, 6 * q, 6 * k, 8 * k + table, 6 * k}));
  o.tensor = 1;
  o.context = 2;
  o.context_balanced = false;
  const auto g = models::build_transformer(test::small_llama(1), o);
  int with_copies = 0;
  for (const auto& l : g.layers)
    for (const auto& op : l.ops)
      for (const auto& kern : op.forward) with_copies += !cost::copy_passes(cost::Copies::Eager, kern).empty();
  EXPECT_EQ(with_copies, 1);  // the call itself, not attention.causal_imbalance
}

// GPT-2 (learned positions, no RoPE): q, k, v are views of the QKV output; backward's split runs
// one cat, 2e x 3 x tokens x hidden.
TEST(StackCopies, LearnedPositionsRunOnlyTheSplitsBackwardCat) {
  auto s = test::small_llama(1);
  s.position_embedding = models::PositionEmbedding::Learned;
  s.num_kv_heads = s.num_heads;
  const auto fa = flash_op(s, flash_options());
  EXPECT_TRUE(cost::copy_passes(cost::Copies::Eager, fa.forward.front()).empty());
  EXPECT_EQ(bytes_of(cost::copy_passes(cost::Copies::Eager, fa.backward.front())), (std::vector<double>{2.0 * 2 * 3 * 512 * 1024}));
}

// Under torch.compile, Inductor's kernels: forward one RoPE kernel for q (2e x 524,288 + the
// 131,072-byte table) and one for k (2e x 131,072 + the table); backward one kernel rotating dq and
// dk back into the cat with dv (2e x 786,432 + the table twice). Learned positions: the cat alone.
// A compiled stack prices them on a GPU; XLA on a TPU (no SM count) fuses otherwise.
TEST(StackCopies, CompiledPassesAreInductorsRopeKernelsAndTheCat) {
  const auto fa = flash_op(test::small_llama(2), flash_options());
  EXPECT_EQ(bytes_of(cost::compiled_copy_passes(fa.forward.front())), (std::vector<double>{2228224, 655360}));
  EXPECT_EQ(bytes_of(cost::compiled_copy_passes(fa.backward.front())), (std::vector<double>{3407872}));
  for (const auto& p : cost::compiled_copy_passes(fa.backward.front())) EXPECT_EQ(p.unvectorised_elems, 0);
  auto learned = test::small_llama(1);
  learned.position_embedding = models::PositionEmbedding::Learned;
  learned.num_kv_heads = learned.num_heads;
  const auto gpt = flash_op(learned, flash_options());
  EXPECT_TRUE(cost::compiled_copy_passes(gpt.forward.front()).empty());
  EXPECT_EQ(bytes_of(cost::compiled_copy_passes(gpt.backward.front())), (std::vector<double>{2.0 * 2 * 3 * 512 * 1024}));

  auto d = config::load_device_profile("h100-sxm-80gb");
  d.stack = *cost::find_stack("torchtitan-compile");
  const auto& k = fa.backward.front();
  const double with = cost::quote_stacked(d, k, "bf16").seconds;
  d.sm_count = 0;  // as a TPU profile has it
  EXPECT_GT(with, cost::quote_stacked(d, k, "bf16").seconds);
}

// The fused attention kernel, then each copy a kernel of its own on the memory-bound curve, at
// least the dispatch time.
TEST(StackCopies, EagerCopiesArePricedAsTheirKernels) {
  auto d = config::load_device_profile("h100-sxm-80gb");
  d.stack = *cost::find_stack("pytorch-eager");
  const auto fa = flash_op(test::small_llama(1), flash_options());
  const auto& k = fa.forward.front();
  const double overhead = cost::launch_overhead(d, "bf16");
  double copies = 0;
  for (const auto& p : cost::copy_passes(cost::Copies::Eager, k)) {
    models::Kernel pass{"pass", models::KernelKind::Memory, 1, 0, 0, 0, 0, p.bytes};
    if (p.cast_up) pass.role = models::KernelRole::CastUp;  // no faster than the device's cast-up rate
    copies += std::max(cost::kernel_time(d, pass, "bf16"), d.stack.dispatch_s) + overhead;
  }
  const double eager = cost::quote_kernel(d, k, "bf16").seconds;
  d.stack.copies = cost::Copies::Fused;
  EXPECT_NEAR(eager - cost::quote_kernel(d, k, "bf16").seconds, copies, 1e-15);
  EXPECT_GT(copies, 0.0);
}

// pytorch-eager runs them; the compiled and Megatron/TE stacks fuse them (Inductor; TE's fused
// RoPE); the key overrides the preset and refuses what it does not know.
TEST(StackCopies, PresetsAndKey) {
  EXPECT_EQ(cost::find_stack("pytorch-eager")->copies, cost::Copies::Eager);
  for (const char* fused : {"default", "torchtitan-compile", "torchtitan-async-tp", "megatron-te", "llm-foundry", "deepspeed", "horovod"})
    EXPECT_EQ(cost::find_stack(fused)->copies, cost::Copies::Fused) << fused;
  const auto eager = test::simulate_over(kLlama, R"({"extends": "base.json", "stack": {"preset": "pytorch-eager"}})");
  const auto fused =
      test::simulate_over(kLlama, R"({"extends": "base.json", "stack": {"preset": "pytorch-eager", "copies": "fused"}})");
  EXPECT_GT(eager.step_time_s, fused.step_time_s);
  test::expect_parts_sum_to_step(eager);
  auto e = test::input_error_over(kLlama, R"({"extends": "base.json", "stack": {"copies": "eagre"}})");
  EXPECT_NE(e.find("/stack/copies"), std::string::npos) << e;
  EXPECT_NE(e.find("fused, eager"), std::string::npos) << e;
  e = test::input_error_over(kLlama, R"({"extends": "base.json", "stack": {"copie": "eager"}})");
  EXPECT_NE(e.find("did you mean \"copies\""), std::string::npos) << e;
  e = test::input_error_over(kLlama, R"({"extends": "base.json", "training": {"attention": "standard"}, "stack": {"copies": "eager"}})");
  EXPECT_NE(e.find("/stack/copies"), std::string::npos) << e;
  EXPECT_NE(e.find("training.attention"), std::string::npos) << e;
}
