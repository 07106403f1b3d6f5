// Issue 30 item 2: recomputation of some blocks only (Megatron-LM's --recompute-method block and
// uniform, torchtitan's every n-th block), against closed forms: memory per block kept, compute
// of k recomputed blocks k forward passes.
#include <gtest/gtest.h>

#include <string>

#include "helpers.hpp"
#include "models/model_graph.hpp"
#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "strategies/layout.hpp"
#include "strategies/plan.hpp"
#include "strategies/recompute.hpp"
#include "strategies/works.hpp"

using namespace dtsim;
using strategies::Recompute;

namespace {

// GPT-2 small's shape: 12 blocks.
models::ModelGraph small(std::int64_t micro_batch = 1) {
  models::TransformerSpec s;
  s.name = "small";
  s.num_layers = 12;
  s.hidden_size = 768;
  s.num_heads = 12;
  s.num_kv_heads = 12;
  s.ffn_hidden_size = 3072;
  s.seq_len = 1024;
  s.vocab_size = 50257;
  return models::build_transformer(s, {micro_batch, 2, models::Attention::Flash, 1, false});
}

strategies::ParallelismSpec full(int pipeline = 1) {
  strategies::ParallelismSpec p;
  p.pipeline = pipeline;
  p.recompute = Recompute::Full;
  return p;
}

strategies::TrainingSpec batch(std::int64_t global) {
  strategies::TrainingSpec t;
  t.global_batch = global;
  return t;
}

strategies::PlanLayout laid(const models::ModelGraph& g, const strategies::ParallelismSpec& p, std::int64_t global = 1) {
  return strategies::plan_layout(g, p, batch(global), {});
}

const models::Layer& block(const models::ModelGraph& g, int i) { return g.layers[static_cast<std::size_t>(i) + 1]; }

double kernel_flops(const taskgraph::Work& w) {
  double f = 0;
  for (const auto& k : w.kernels) f += k.flops;
  return f;
}

double forward_flops(const models::Layer& l) {
  double f = 0;
  for (const auto& op : l.ops)
    for (const auto& k : op.forward) f += k.flops;
  return f;
}

}  // namespace

// Every first block is every block; every 13th of 12 is none: memory and FLOPs as full and none.
TEST(RecomputeBlocks, EveryOneIsFullAndEveryBeyondTheBlocksIsNone) {
  const auto g = small();
  auto every = full();
  const auto whole = laid(g, every);
  every.recompute_every = 1;
  const auto one = laid(g, every);
  EXPECT_EQ(one.plan.memory.activations, whole.plan.memory.activations);
  EXPECT_EQ(one.plan.hardware_flops_per_step, whole.plan.hardware_flops_per_step);
  every.recompute_every = 13;
  strategies::ParallelismSpec none;
  const auto kept = laid(g, none), beyond = laid(g, every);
  EXPECT_EQ(beyond.plan.memory.activations, kept.plan.memory.activations);
  EXPECT_EQ(beyond.plan.hardware_flops_per_step, beyond.plan.model_flops_per_step);
  // The first N blocks with N at least the chunk's blocks, and groups of one, are full too.
  auto first = full();
  first.recompute_layers = 12;
  EXPECT_EQ(laid(g, first).plan.memory.activations, whole.plan.memory.activations);
  auto group = full();
  group.recompute_group = 1;
  EXPECT_EQ(laid(g, group).plan.memory.activations, whole.plan.memory.activations);
}

// The first k blocks keep their input; the other 12 - k keep everything; backward rebuilds one
// block at a time. One micro-batch: the activations are that sum plus one block rebuilt.
TEST(RecomputeBlocks, FirstKBlocksKeepTheirInputOnly) {
  const auto g = small();
  const auto& b = block(g, 0);
  const double outside = g.layers.front().saved_bytes() + g.layers.back().saved_bytes();
  for (int k : {1, 4, 11}) {
    auto p = full();
    p.recompute_layers = k;
    const double expected = outside + k * b.input_bytes + (12 - k) * b.saved_bytes() + b.saved_bytes();
    EXPECT_DOUBLE_EQ(laid(g, p).plan.memory.activations, expected) << k;
  }
}

// Recomputing k blocks costs k forward passes: in FLOPs per step and in each backward's kernels.
TEST(RecomputeBlocks, KRecomputedBlocksCostKForwardPasses) {
  const auto g = small();
  const auto& b = block(g, 0);
  double matmul = 0;  // the model FLOPs of one block's forward
  for (const auto& op : b.ops)
    if (op.matmul)
      for (const auto& k : op.forward) matmul += k.flops;
  const std::int64_t micro_batches = 4;
  for (int k : {0, 3, 12}) {
    auto p = full();
    p.recompute_layers = k;
    p.recompute = k == 0 ? Recompute::None : Recompute::Full;
    const auto r = laid(g, p, micro_batches);
    EXPECT_DOUBLE_EQ(r.plan.hardware_flops_per_step - r.plan.model_flops_per_step, k * matmul * micro_batches) << k;
    const auto& chunk = r.layout.chunk_layers[0];
    const auto none = strategies::backward_work(chunk, g, strategies::ParallelismSpec{}, 0);
    const auto some = strategies::backward_work(chunk, g, p, 0, {}, &r.layout.checkpoints);
    EXPECT_NEAR(kernel_flops(some) - kernel_flops(none), k * forward_flops(b), 1e-6 * kernel_flops(none)) << k;
  }
}

// Megatron-LM's block method counts per pipeline chunk: with two stages, the first two blocks of
// each. torchtitan's counter runs over a stage's chunks in order: every second of stage 0's
// blocks 0-2 and 6-8 (interleaved, two chunks per stage) is its 2nd, 4th and 6th, blocks 1, 6, 8.
TEST(RecomputeBlocks, MegatronCountsPerChunkAndTorchtitanPerStage) {
  const auto g = small();
  auto p = full(2);
  p.recompute_layers = 2;
  p.micro_batch = 1;
  auto k = strategies::layout_of(g, p, batch(2));
  for (int i = 0; i < 12; ++i)
    EXPECT_EQ(k.checkpoints.of(block(g, i)), i % 6 < 2 ? Recompute::Full : Recompute::None) << i;
  p = full(2);
  p.schedule = strategies::Schedule::Interleaved;
  p.virtual_stages = 2;
  p.recompute_every = 2;
  k = strategies::layout_of(g, p, batch(2));
  for (int i = 0; i < 12; ++i) {
    const bool stage0 = (i / 3) % 2 == 0;
    const bool picked = stage0 ? (i == 1 || i == 6 || i == 8) : (i == 4 || i == 9 || i == 11);
    EXPECT_EQ(k.checkpoints.of(block(g, i)), picked ? Recompute::Full : Recompute::None) << i;
  }
  EXPECT_EQ(k.checkpoints.of(g.layers.front()), Recompute::None);  // the embedding is never checkpointed
}

// Megatron-LM's uniform method: runs of N blocks from each chunk's first, the last run shorter,
// each keeping its first block's input and rebuilt whole: kept ceil(12 / N) inputs, rebuilt N.
TEST(RecomputeBlocks, GroupsKeepOneInputAndRebuildWhole) {
  const auto g = small();
  const auto& b = block(g, 0);
  const double outside = g.layers.front().saved_bytes() + g.layers.back().saved_bytes();
  for (int n : {3, 5, 12}) {
    auto p = full();
    p.recompute_group = n;
    const auto k = strategies::layout_of(g, p, batch(1));
    const auto& chunk = k.chunk_layers[0];
    const int runs = (12 + n - 1) / n;
    EXPECT_DOUBLE_EQ(k.checkpoints.kept(chunk), outside + runs * b.input_bytes) << n;
    EXPECT_DOUBLE_EQ(k.checkpoints.rebuilt(chunk), n * b.saved_bytes()) << n;
    EXPECT_EQ(laid(g, p).plan.hardware_flops_per_step, laid(g, full()).plan.hardware_flops_per_step) << n;
  }
  // A group of the whole chunk is GPipe's stage recomputation.
  auto chunk = full(2);
  chunk.recompute_group = 6;
  auto stage = full(2);
  stage.recompute = Recompute::Stage;
  EXPECT_EQ(laid(g, chunk, 2).plan.memory.activations, laid(g, stage, 2).plan.memory.activations);
}

namespace {
std::string recompute_error(const std::string& parallelism) {
  test::TempDir dir;
  dir.file("base.json", test::kValidScenario);
  try {
    config::load_scenario(dir.file("c.json", R"({"extends": "base.json", "parallelism": )" + parallelism + "}"));
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(RecomputeBlocks, KeysNeedFullRecomputationAndOneRule) {
  const std::string none = recompute_error(R"({"data": 8, "micro_batch_size": 4, "recompute_layers": 2})");
  EXPECT_NE(none.find("/parallelism/recompute_layers"), std::string::npos) << none;
  EXPECT_NE(none.find("did you mean \"recompute\": \"full\""), std::string::npos) << none;
  const std::string two =
      recompute_error(R"({"data": 8, "micro_batch_size": 4, "recompute": "full", "recompute_layers": 2, "recompute_every": 2})");
  EXPECT_NE(two.find("not recompute_layers and recompute_every"), std::string::npos) << two;
  EXPECT_NE(recompute_error(R"({"data": 8, "micro_batch_size": 4, "recompute": "full", "recompute_layers": 13})").find("recompute_layers"),
            std::string::npos);  // more than GPT-2's 12 blocks
  EXPECT_EQ(recompute_error(R"({"data": 8, "micro_batch_size": 4, "recompute": "full", "recompute_every": 13})"), "");
  EXPECT_EQ(recompute_error(R"({"data": 8, "micro_batch_size": 4, "recompute": "full", "recompute_group": 4})"), "");
}
