// FSDP2's all-gather copy-out (stack.gather_copies "copy-out", the pytorch-eager and torchtitan
// presets): before a unit's forward, and before its backward where it was gathered again, the
// compute stream copies the all-gather's output into the unit's unsharded parameters
// (FSDPParamGroup.wait_for_unshard -> foreach_all_gather_copy_out): every gathered byte read and
// written once, inside the compute task that first uses the gather.
#include <gtest/gtest.h>

#include <string>

#include "helpers.hpp"
#include "sim/config/scenario.hpp"
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

// Bytes the compute tasks of GPU 0 move, and the bytes its ZeRO-3 all-gathers deliver.
struct Moved {
  double compute = 0, gathered = 0;
};

Moved moved(const taskgraph::TaskGraph& g) {
  Moved m;
  for (const auto& t : g.tasks) {
    if (t.is_collective) {
      if (t.collective().op == taskgraph::CollectiveOp::AllGather && t.label().rfind("zero3 gather", 0) == 0)
        m.gathered += t.collective().bytes;
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
  EXPECT_EQ(with.plan.graph.tasks.size(), without.plan.graph.tasks.size());  // kernels inside tasks, no new tasks
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
