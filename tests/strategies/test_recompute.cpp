// Issue 30 item 2: recomputation of some blocks only (Megatron-LM's --recompute-method block and
// uniform, torchtitan's every n-th block), against closed forms: memory per block kept, compute
// of k recomputed blocks k forward passes.
#include <gtest/gtest.h>

#include <string>

#include "llama_spec.hpp"
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

namespace {
// A Llama block's shape, small: GQA (16 heads, 4 KV heads of 64), SwiGLU, RMSNorm, no biases.
models::ModelGraph llama(std::int64_t tensor = 1, bool sp = false) {
  return models::build_transformer(test::small_llama(2), {2, 2, models::Attention::Flash, tensor, sp});
}

strategies::Checkpoints op_level(const models::ModelGraph& g, int tensor = 1, bool sp = false) {
  strategies::ParallelismSpec p;
  p.recompute = Recompute::Op;
  p.tensor = tensor;
  p.sequence_parallel = sp;
  strategies::Layers all;
  for (const auto& l : g.layers) all.push_back(&l);
  return strategies::Checkpoints(p, {all}, 1);
}
}  // namespace

// torchtitan's op-level policy on one Llama block: the matmuls run wq, wk, wv, wo, w1, w3, w2, of
// which the 1st, 3rd, 5th and 7th return what is kept (q, v, the gate, the block's output
// projection), as does the fused attention (O and the log-sum-exp); with the block's input that
// is all. t = 2 x 512 tokens, 2 bytes a value.
TEST(RecomputeOpLevel, KeepsWhatTorchtitansPolicySavesForOneLlamaBlock) {
  const auto g = llama();
  const auto& b = block(g, 0);
  const double t = 2 * 512, h = 1024, e = 2, kv = 4 * 64, ffn = 2816, lse = 2 * 16 * 512 * 4.0;
  const double hand = t * h * e     // the input
                      + t * h * e   // q (wq)
                      + t * kv * e  // v (wv)
                      + t * h * e + lse  // attention's O and log-sum-exp
                      + t * ffn * e      // the gate (w1)
                      + t * h * e;       // w2's output
  EXPECT_DOUBLE_EQ(op_level(g).kept({&b}), hand);
  // Less than selective recomputation keeps under flash attention (everything), more than full.
  EXPECT_LT(hand, b.saved_bytes());
  EXPECT_GT(hand, b.input_bytes);
  // Under sequence parallelism over 4 ranks: a quarter of the tokens' input, and the two
  // reduce-scatters' outputs (saved by the policy) besides.
  const auto sp = llama(4, true);
  const double quarter = t * h * e / 4;
  const double hand_sp = quarter + t * (h / 4) * e + t * (kv / 4) * e + t * (h / 4) * e + lse / 4 + t * (ffn / 4) * e +
                         t * h * e + 2 * quarter;
  EXPECT_DOUBLE_EQ(op_level(sp, 4, true).kept({&block(sp, 0)}), hand_sp);
}

// What backward re-runs: the norms, wk, wo, the first residual, w3 and SwiGLU; not wq, wv, w1, w2,
// attention, nor the last residual (after w2, the last op whose backward needs a saved input).
// Its matmul FLOPs are wk's, wo's and w3's: 2 t h (kv + h + ffn).
TEST(RecomputeOpLevel, ReRunsEverySecondMatmulAndTheElementwiseOps) {
  const auto g = llama();
  const auto& b = block(g, 0);
  const auto again = strategies::reruns(b, Recompute::Op);
  std::vector<std::string> whole, parts;
  for (std::size_t i = 0; i < b.ops.size(); ++i) {
    if (again[i].whole) whole.push_back(b.ops[i].name);
    for (std::size_t c : again[i].calls) parts.push_back(b.ops[i].name + "." + std::to_string(c));
  }
  EXPECT_EQ(whole, (std::vector<std::string>{"norm1", "attention.residual", "norm2", "mlp.swiglu"}));
  EXPECT_EQ(parts, (std::vector<std::string>{"qkv.1", "attention.out.0", "mlp.gate_up.1"}));
  const double t = 2 * 512, h = 1024, kv = 4 * 64, ffn = 2816;
  EXPECT_DOUBLE_EQ(strategies::recompute_flops(b, Recompute::Op), 2 * t * h * (kv + h + ffn));
  // The same kernels open the block's backward.
  strategies::ParallelismSpec p;
  p.recompute = Recompute::Op;
  const auto ck = op_level(g);
  const auto w = strategies::backward_work({&b}, g, p, 0, {}, &ck);
  const auto none = strategies::backward_work({&b}, g, strategies::ParallelismSpec{}, 0);
  EXPECT_EQ(w.kernels.size(), none.kernels.size() + 7);
  EXPECT_EQ(w.kernels[1].n, 4 * 64);  // wk alone: 4 KV heads of 64
  // Tensor-parallel collectives: the forward's all-gathers again, not its reduce-scatters (kept).
  p.tensor = 4;
  p.sequence_parallel = true;
  const auto sp = llama(4, true);
  const auto comms = strategies::recompute_comms(block(sp, 0), Recompute::Op, p, 0);
  ASSERT_EQ(comms.size(), 1u);
  EXPECT_EQ(comms[0].op, taskgraph::CollectiveOp::AllGather);
  EXPECT_EQ(comms[0].count, 2);
}

// A linear with a bias is aten.addmm, which torchtitan's save list does not name: GPT-2's block
// keeps only its input and what attention returns, and re-runs every linear whole.
TEST(RecomputeOpLevel, BiasedLinearsAreReRunWhole) {
  const auto g = small();
  const auto& b = block(g, 0);
  const double t = 1024, h = 768, e = 2, lse = 12 * 1024 * 4.0;
  strategies::ParallelismSpec p;
  p.recompute = Recompute::Op;
  EXPECT_DOUBLE_EQ(strategies::Checkpoints(p, {{&b}}, 1).kept({&b}), t * h * e + t * h * e + lse);
  double linears = 0;
  for (const auto& op : b.ops)
    if (op.matmul && op.name != "flash_attention") linears += op.forward.front().flops;
  EXPECT_DOUBLE_EQ(strategies::recompute_flops(b, Recompute::Op), linears);
}

// recompute_flops sums the re-run kernels in place (a sweep calls it for every layer of every
// candidate): bit for bit what summing rerun_kernels' FLOPs op by op gives, for every
// recomputation, on blocks with and without biases, and nothing outside blocks.
TEST(RecomputeFlops, EqualSummingTheReRunKernelsBitForBit) {
  for (const auto& g : {small(), llama()}) {
    for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full, Recompute::Stage, Recompute::Op}) {
      for (const auto& l : g.layers) {
        double f = 0;
        const auto again = strategies::reruns(l, r);
        for (std::size_t i = 0; i < l.ops.size(); ++i)
          if (l.ops[i].matmul && again[i].any())
            for (const auto& k : strategies::rerun_kernels(l.ops[i], again[i])) f += k.flops;
        EXPECT_EQ(strategies::recompute_flops(l, r), f) << l.name;
      }
    }
    EXPECT_GT(strategies::recompute_flops(block(g, 0), Recompute::Full), strategies::recompute_flops(block(g, 0), Recompute::Selective));
  }
}

// torchtitan's policy is read off dense transformer blocks: MoE blocks and CNNs are refused.
TEST(RecomputeOpLevel, MixtureOfExpertsAndCnnsAreRefused) {
  test::TempDir dir;
  dir.file("base.json", test::kValidScenario);
  auto error = [&](const std::string& model) {
    try {
      config::load_scenario(dir.file("c.json", R"({"extends": "base.json", "model": )" + model +
                                                   R"(, "parallelism": {"data": 8, "micro_batch_size": 4, "recompute": "op"}})"));
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error(R"({"preset": "mixtral-8x7b"})").find("mixture-of-experts blocks is not modelled"), std::string::npos);
  EXPECT_NE(error(R"({"preset": "resnet-50"})").find("not a CNN's"), std::string::npos);
  EXPECT_EQ(error(R"({"preset": "gpt2"})"), "");
}
