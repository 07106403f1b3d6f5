// FSDP2's all-gather copy-out (stack.gather_copies "copy-out", the pytorch-eager and torchtitan
// presets): before a unit's forward, and before its backward where it was gathered again, the
// compute stream copies the all-gather's output into the unit's unsharded parameters
// (FSDPParamGroup.wait_for_unshard -> foreach_all_gather_copy_out): every gathered byte read and
// written once, inside the compute task that first uses the gather.
#include <gtest/gtest.h>

#include <string>

#include "helpers.hpp"
#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "sim/cost/roofline.hpp"
#include "sim/results/result.hpp"

using namespace dtsim;

namespace {

// GPT-2 on one DGX A100, FSDP over its 8 GPUs, micro-batch 4, 2 micro-batches, under `stack`.
config::Scenario gpt2_fsdp(const test::TempDir& dir, const std::string& stack, const std::string& framework = "fsdp") {
  const std::string json = R"({"name": "fsdp-copy-out", "model": {"preset": "gpt2"}, "hardware": {"device": "a100-sxm-80gb"},
    "cluster": {"preset": "dgx-a100", "nodes": 1}, "training": {"global_batch_size": 64, "attention": "flash"},
    "parallelism": {"micro_batch_size": 4, "zero_stage": 3, "framework": ")" + framework + R"("},
    "stack": )" + stack + R"(, "simulation": {"backend": "analytical"}})";
  return config::load_scenario(dir.file("s.json", json));
}

bool copy_in(const taskgraph::Task& t) { return !t.is_collective && t.label().rfind("fsdp reduce-scatter copy-in", 0) == 0; }

// Bytes the compute tasks of GPU 0 move (the reduce-scatters' copy-in tasks apart), and the bytes
// its ZeRO-3 all-gathers deliver.
struct Moved {
  double compute = 0, gathered = 0;
  std::size_t copy_in_tasks = 0;
};

Moved moved(const taskgraph::TaskGraph& g) {
  Moved m;
  for (const auto& t : g.tasks) {
    if (t.is_collective) {
      if (t.collective().op == taskgraph::CollectiveOp::AllGather && t.label().rfind("zero3 gather", 0) == 0)
        m.gathered += t.collective().bytes;
    } else if (copy_in(t)) {
      ++m.copy_in_tasks;
    } else if (t.rank == 0 && t.work >= 0) {
      const auto& w = g.works[static_cast<std::size_t>(t.work)];
      for (const auto& k : w.kernels) m.compute += k.bytes * w.repeat;
    }
  }
  return m;
}

}  // namespace

TEST(FsdpCopyOut, ComputeReadsAndWritesEveryGatheredByteOnce) {
  test::TempDir dir;
  const auto without = results::simulate(gpt2_fsdp(dir, R"({"preset": "pytorch-eager", "gather_copies": "none"})"));
  const auto with = results::simulate(gpt2_fsdp(dir, R"({"preset": "pytorch-eager"})"));
  const Moved a = moved(without.plan.graph), b = moved(with.plan.graph);
  ASSERT_GT(a.gathered, 0);
  EXPECT_DOUBLE_EQ(a.gathered, b.gathered);  // the same gathers
  EXPECT_NEAR(b.compute - a.compute, 2 * a.gathered, 1e-6 * a.gathered);
  // Kernels inside tasks, no new tasks beside the reduce-scatters' copy-in (FsdpCopyIn below).
  EXPECT_EQ(a.copy_in_tasks, 0u);
  EXPECT_GT(b.copy_in_tasks, 0u);
  EXPECT_EQ(with.plan.graph.tasks.size(), without.plan.graph.tasks.size() + b.copy_in_tasks);
  // On the compute stream: the step takes at least the copies' streaming time longer.
  const double hbm = 2039e9;  // the A100's datasheet bandwidth: no copy can beat it
  EXPECT_GT(with.step_time_s - without.step_time_s, 2 * a.gathered / hbm);
}

// The torchtitan presets shard with FSDP2 too; the default stack and llm-foundry (FSDP1's flat
// parameter is the all-gather's output) copy nothing.
TEST(FsdpCopyOut, WhichStacksCopy) {
  test::TempDir dir;
  const double none = moved(results::simulate(gpt2_fsdp(dir, R"({"preset": "default"})")).plan.graph).compute;
  for (const std::string preset : {"torchtitan-compile", "torchtitan-async-tp", "llm-foundry", "default"}) {
    SCOPED_TRACE(preset);
    const auto s = gpt2_fsdp(dir, R"({"preset": ")" + preset + "\"}");
    EXPECT_EQ(s.parallelism.framework.gather_copy_out, preset.rfind("torchtitan", 0) == 0);
  }
  const auto forced = gpt2_fsdp(dir, R"({"preset": "default", "gather_copies": "copy-out"})");
  EXPECT_TRUE(forced.parallelism.framework.gather_copy_out);
  EXPECT_GT(moved(results::simulate(forced).plan.graph).compute, none);
}

// A preset's copy-out applies only under FSDP; written out, the key needs it.
TEST(FsdpCopyOut, TheKeyNeedsTheFsdpFramework) {
  test::TempDir dir;
  EXPECT_FALSE(gpt2_fsdp(dir, R"({"preset": "pytorch-eager"})", "megatron-lm").parallelism.framework.gather_copy_out);
  try {
    gpt2_fsdp(dir, R"({"preset": "pytorch-eager", "gather_copies": "copy-out"})", "deepspeed");
    FAIL() << "accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("/stack/gather_copies"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("set parallelism.framework to \"fsdp\""), std::string::npos) << e.what();
  }
}

namespace {

// Bytes GPU 0's group reduce-scatters in ZeRO-3's per-layer reductions.
double reduced(const taskgraph::TaskGraph& g) {
  double bytes = 0;
  for (const auto& t : g.tasks)
    if (t.is_collective && t.collective().op == taskgraph::CollectiveOp::ReduceScatter) bytes += t.collective().bytes;
  return bytes;
}

}  // namespace

// torchtitan's FSDP2 reduces in fp32 (mixed_precision_reduce "float32" into fully_shard's
// MixedPrecisionPolicy): twice the bf16 gradients' bytes; Composer's PURE (llm-foundry) and the
// default stack reduce the gradients' dtype; the scenario's zero3.reduce_dtype overrides the stack.
TEST(FsdpReduceDtype, TorchtitanReduceScattersInFp32) {
  test::TempDir dir;
  const double plain = reduced(results::simulate(gpt2_fsdp(dir, R"({"preset": "default"})")).plan.graph);
  ASSERT_GT(plain, 0);
  for (const char* titan : {"pytorch-eager", "torchtitan-compile"}) {
    const auto s = gpt2_fsdp(dir, std::string(R"({"preset": ")") + titan + R"("})");
    EXPECT_EQ(s.parallelism.framework.reduce_bytes, 4) << titan;
    EXPECT_NEAR(reduced(results::simulate(s).plan.graph), 2 * plain, 1e-9 * plain) << titan;
  }
  EXPECT_NEAR(reduced(results::simulate(gpt2_fsdp(dir, R"({"preset": "llm-foundry"})")).plan.graph), plain, 1e-9 * plain);
  const std::string json = R"({"extends": "s.json", "parallelism": {"zero3": {"reduce_dtype": "bf16"}}})";
  gpt2_fsdp(dir, R"({"preset": "torchtitan-compile"})");  // writes s.json
  const auto over = config::load_scenario(dir.file("over.json", json));
  EXPECT_EQ(over.parallelism.framework.reduce_bytes, 2);
}

// FSDP2's foreach_reduce copies each unit's gradients into the reduce-scatter's input on the compute
// stream (foreach_reduce_scatter_copy_in, torch._chunk_cat), cast to the reduce dtype, and the
// reduce-scatter waits for it: under torchtitan's fp32 reduce, a cast up that reads 2 bytes and
// writes 4 per gradient. FSDP1 (llm-foundry) reduces its flat gradient as it is: no copy.
TEST(FsdpCopyIn, EveryReduceScatterWaitsForItsGradientsCopiedIn) {
  test::TempDir dir;
  const auto r = results::simulate(gpt2_fsdp(dir, R"({"preset": "torchtitan-compile"})"));
  const auto& g = r.plan.graph;
  int reduces = 0;
  for (const auto& t : g.tasks) {
    if (!t.is_collective || t.collective().op != taskgraph::CollectiveOp::ReduceScatter) continue;
    ++reduces;
    const taskgraph::Task* copy = nullptr;
    for (int d : t.deps)
      if (copy_in(g.tasks[static_cast<std::size_t>(d)])) copy = &g.tasks[static_cast<std::size_t>(d)];
    ASSERT_NE(copy, nullptr) << t.label();
    const auto& w = g.works[static_cast<std::size_t>(copy->work)];
    ASSERT_EQ(w.kernels.size(), 1u);
    const auto& k = w.kernels.front();
    EXPECT_EQ(k.role, models::KernelRole::CastUp);
    EXPECT_DOUBLE_EQ(k.elems * 4, t.collective().bytes);  // every gradient the reduce-scatter sums, in fp32
    EXPECT_DOUBLE_EQ(k.bytes, k.elems * (2 + 4));
  }
  EXPECT_GT(reduces, 0);
  for (const auto& t : results::simulate(gpt2_fsdp(dir, R"({"preset": "llm-foundry"})")).plan.graph.tasks) EXPECT_FALSE(copy_in(t));
}

// A cast up moves its bytes at the device's measured cast-up rate where that is below the streaming
// rate (h100-sxm-80gb: 2.11 TB/s against 2.97): the copy-in of GPT-2 XL's block (30.7 M gradients,
// 184 MB) takes what 184 MB at 2.11 TB/s take; bf16 into a bf16 reduce-scatter, a plain copy, streams.
TEST(FsdpCopyIn, CastUpIsPricedAtTheDevicesRate) {
  const auto d = config::load_device_profile("h100-sxm-80gb");
  ASSERT_GT(d.cast_up_bandwidth, 0);
  models::Kernel k{"copy-in", models::KernelKind::Memory, 1, 0, 0, 0, 0, 30740800.0 * 6};
  const double plain = cost::kernel_time(d, k, "bf16");
  k.role = models::KernelRole::CastUp;
  EXPECT_DOUBLE_EQ(cost::kernel_time(d, k, "bf16"), k.bytes / d.cast_up_bandwidth);
  EXPECT_LT(plain, cost::kernel_time(d, k, "bf16"));
  const auto b200 = config::load_device_profile("b200");  // no rate, measured or estimated: streams
  ASSERT_EQ(b200.cast_up_bandwidth, 0);
  const double b200_cast = cost::kernel_time(b200, k, "bf16");
  k.role = models::KernelRole::Plain;
  EXPECT_DOUBLE_EQ(cost::kernel_time(b200, k, "bf16"), b200_cast);
}

// torchao's float8 all-gather (parallelism.zero3.fp8_all_gather): every block's FP8 GEMM weights
// go over the wire, and through the copy-out, in one byte where bf16 takes two. A Llama-shaped
// model on 8 H100s under torchtitan-compile, FP8, one micro-batch: each block gathered forward and
// backward, the root unit (embedding, final norm, head: no FP8 GEMMs) unchanged.
TEST(FsdpFp8AllGather, BlocksGatherTheirFp8WeightsInOneByte) {
  test::TempDir dir;
  auto scenario = [&](const std::string& gather) {
    const std::string json = R"({"name": "fp8-gather", "model": {"preset": "llama-3-8b", "num_layers": 4, "seq_len": 2048},
      "hardware": {"device": "h100-sxm-80gb"}, "cluster": {"preset": "dgx-h100", "nodes": 1},
      "training": {"global_batch_size": 8, "attention": "flash", "precision": "fp8", "fp8_recipe": "current"},
      "parallelism": {"micro_batch_size": 1, "zero_stage": 3, "framework": "fsdp")" + gather + R"(},
      "stack": {"preset": "torchtitan-compile"}, "simulation": {"backend": "analytical"}})";
    return config::load_scenario(dir.file("g" + std::to_string(gather.size()) + ".json", json));
  };
  const auto plain = results::simulate(scenario("")), fp8 = results::simulate(scenario(R"(, "zero3": {"fp8_all_gather": true})"));
  const Moved a = moved(plain.plan.graph), b = moved(fp8.plan.graph);
  // A block's FP8 weights: its linear layers' (QKV, output, gate-and-up, down) of Llama 3 8B.
  const double h = 4096, fp8_block = h * (h + 2 * 1024) + h * h + 3 * h * 14336;
  EXPECT_NEAR(a.gathered - b.gathered, 2 * 4 * fp8_block, 1e-6 * a.gathered);
  // The copy-out reads and writes what was gathered.
  EXPECT_NEAR(a.compute - b.compute, 2 * (a.gathered - b.gathered), 1e-6 * a.compute);
  EXPECT_LE(fp8.step_time_s, plain.step_time_s);
}

// The gathered unit and its prefetch in the memory peak: a block of Llama 3 8B's shape with a
// small vocabulary (so a block is the largest unit) holds its FP8 weights in one byte.
TEST(FsdpFp8AllGather, GatheredBlocksHoldTheirFp8WeightsInOneByte) {
  test::TempDir dir;
  auto peak = [&](const std::string& gather) {
    const std::string json = R"({"name": "fp8-gather-memory", "model": {"preset": "llama-3-8b", "num_layers": 4, "seq_len": 2048,
      "vocab_size": 1024}, "hardware": {"device": "h100-sxm-80gb"}, "cluster": {"preset": "dgx-h100", "nodes": 1},
      "training": {"global_batch_size": 8, "attention": "flash", "precision": "fp8", "fp8_recipe": "current"},
      "parallelism": {"micro_batch_size": 1, "zero_stage": 3, "framework": "fsdp")" + gather + R"(},
      "stack": {"preset": "torchtitan-compile"}, "simulation": {"backend": "analytical"}})";
    return results::simulate(config::load_scenario(dir.file("m" + std::to_string(gather.size()) + ".json", json))).memory.other;
  };
  const double h = 4096, fp8_block = h * (h + 2 * 1024) + h * h + 3 * h * 14336;
  EXPECT_NEAR(peak("") - peak(R"(, "zero3": {"fp8_all_gather": true})"), 2 * fp8_block, 1.0);
}

TEST(FsdpFp8AllGather, NeedsFsdpAndFp8) {
  test::TempDir dir;
  auto error = [&](const std::string& body) {
    try {
      config::load_scenario(dir.file("e.json", body));
    } catch (const InputError& e) {
      return e.pointer() + ": " + e.reason();
    }
    return std::string();
  };
  const std::string base = R"({"name": "e", "model": {"preset": "gpt2"}, "hardware": {"device": "h100-sxm-80gb"},
    "cluster": {"preset": "dgx-h100", "nodes": 1}, "training": {"global_batch_size": 8, "precision": "PRECISION"},
    "parallelism": {"zero_stage": 3, "framework": "FRAMEWORK", "zero3": {"fp8_all_gather": true}}})";
  auto with = [&](const std::string& precision, const std::string& framework) {
    std::string s = base;
    s.replace(s.find("PRECISION"), 9, precision);
    s.replace(s.find("FRAMEWORK"), 9, framework);
    return error(s);
  };
  EXPECT_NE(with("bf16", "fsdp").find("needs training.precision \"fp8\""), std::string::npos);
  EXPECT_NE(with("fp8", "deepspeed").find("give framework \"fsdp\""), std::string::npos);
  EXPECT_EQ(with("fp8", "fsdp"), "");
}
