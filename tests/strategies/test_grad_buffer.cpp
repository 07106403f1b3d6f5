// Megatron-LM's data-parallel gradient buffer under a Megatron stack (issue 30, items 1 and 3):
// fp32 main gradients held and reduced in fp32 unless --grad-reduce-in-bf16, in memory and on
// the wire alike; the key's refusals; `dtsim import megatron` mapping the flag.
#include <gtest/gtest.h>

#include <string>

#include "scenario_helpers.hpp"
#include "sim/config/import_run.hpp"
#include "sim/config/scenario.hpp"
#include "sim/cost/roofline.hpp"
#include "sim/results/closed_form.hpp"
#include "sim/results/result.hpp"

using namespace dtsim;

namespace {

// GPT-2 small on 8 GPUs, ZeRO-1 (Megatron's distributed optimizer), bf16, analytical.
const std::string kBase = R"({
  "schema_version": 1, "name": "grad-buffer",
  "model": {"preset": "gpt2"},
  "hardware": {"device": "a100-sxm-80gb"},
  "cluster": {"nodes": 1, "gpus_per_node": 8,
              "intra_node": {"bandwidth_GBps": 300, "latency_us": 2},
              "inter_node": {"nics_per_node": 8, "nic_bandwidth_GBps": 25, "latency_us": 5}},
  "parallelism": {"data": 8, "micro_batch_size": 4, "zero_stage": 1},
  "training": {"global_batch_size": 32, "precision": "bf16", "attention": "flash"},
  "simulation": {"backend": "analytical"}
})";

results::Result with_stack(const std::string& stack) {
  return test::simulate_over(kBase, R"({"extends": "base.json", "stack": )" + stack + "}");
}

// Bytes of the data-parallel gradient buckets' collectives on GPU 0 (one replica's share).
double bucket_bytes(const results::Result& r) {
  double bytes = 0;
  for (const auto& t : r.plan.graph.tasks)
    if (t.is_collective && t.label().find(" bucket ") != std::string::npos) bytes += t.collective().bytes;
  return bytes;
}

}  // namespace

TEST(GradBuffer, MegatronTeReducesItsFp32MainGradients) {
  const auto plain = with_stack(R"({"preset": "default"})");
  // The vocabulary as the model gives it (megatron-te pads it to 128 x TP otherwise), so that the
  // parameters are the default stack's.
  const auto te = with_stack(R"({"preset": "megatron-te", "vocab_divisible_by": 0})");
  const auto bf16 = with_stack(R"({"preset": "megatron-te", "vocab_divisible_by": 0, "grad_reduce_dtype": "bf16"})");
  ASSERT_GT(bucket_bytes(plain), 0.0);
  // arguments.py: bf16 accumulates and reduces gradients in fp32, 4 bytes where the bf16
  // gradient has 2; --grad-reduce-in-bf16 reduces the bf16 buffer.
  EXPECT_DOUBLE_EQ(bucket_bytes(te), 2.0 * bucket_bytes(plain));
  EXPECT_DOUBLE_EQ(bucket_bytes(bf16), bucket_bytes(plain));
  // Memory: the buffer is held whole (ZeRO-1 shards only the optimizer): 4 bytes a parameter, 2
  // under --grad-reduce-in-bf16.
  EXPECT_DOUBLE_EQ(te.memory.gradients, 2.0 * bf16.memory.gradients);
  EXPECT_DOUBLE_EQ(te.memory.params, bf16.memory.params);
  EXPECT_DOUBLE_EQ(te.memory.optimizer, bf16.memory.optimizer);
  test::expect_parts_sum_to_step(te);
  EXPECT_GE(te.step_time_s, bf16.step_time_s);
}

TEST(GradBuffer, OtherStacksReduceTheGradientsDtype) {
  // torchtitan's stacks on megatron-lm's DDP: PyTorch reduces the gradient as it is, unless asked.
  const auto eager = with_stack(R"({"preset": "pytorch-eager"})");
  EXPECT_DOUBLE_EQ(bucket_bytes(eager), bucket_bytes(with_stack(R"({"preset": "default"})")));
  const auto fp32 = with_stack(R"({"preset": "pytorch-eager", "grad_reduce_dtype": "fp32"})");
  EXPECT_DOUBLE_EQ(bucket_bytes(fp32), 2.0 * bucket_bytes(eager));
}

TEST(GradBuffer, KeyIsRefusedWhereMegatronsBufferIsNotWhatRuns) {
  const auto over = [](const std::string& more) {
    return test::input_error_over(kBase, R"({"extends": "base.json", )" + more + "}");
  };
  auto e = over(R"("stack": {"preset": "megatron-te", "grad_reduce_dtype": "bf16"}, "parallelism": {"zero_stage": 3, "framework": "fsdp"})");
  EXPECT_NE(e.find("/stack/grad_reduce_dtype"), std::string::npos) << e;
  EXPECT_NE(e.find("megatron-lm"), std::string::npos) << e;
  e = over(R"("stack": {"grad_reduce_dtype": "bf16"})");  // the default stack keeps the ZeRO paper's buffers
  EXPECT_NE(e.find("buffers"), std::string::npos) << e;
  e = over(R"("stack": {"preset": "megatron-te", "grad_reduce_dtype": "bf17"})");
  EXPECT_NE(e.find("bf16"), std::string::npos) << e;  // did you mean
}

TEST(GradBuffer, ImportMapsTheBf16BufferWhereTheStackKeepsMegatronsBuffers) {
  using config::import_megatron_args;
  auto r = import_megatron_args("torchrun pretrain_gpt.py --bf16 --grad-reduce-in-bf16 --transformer-impl transformer_engine", "x.sh");
  EXPECT_EQ(r.stack["preset"], "megatron-te");
  EXPECT_EQ(r.stack["grad_reduce_dtype"], "bf16");
  r = import_megatron_args("torchrun pretrain_gpt.py --bf16 --grad-reduce-in-bf16 --tp-comm-overlap --transformer-impl transformer_engine",
                           "x.sh");
  EXPECT_EQ(r.stack["preset"], "megatron-te-tp-overlap");
  EXPECT_EQ(r.stack["grad_reduce_dtype"], "bf16");
  // Without a Transformer Engine stack the default's ZeRO-paper buffers stay: the flag is named as ignored.
  for (const char* impl : {" --transformer-impl local", ""}) {
    r = import_megatron_args(std::string("torchrun pretrain_gpt.py --bf16 --grad-reduce-in-bf16") + impl, "x.sh");
    EXPECT_EQ(r.stack.value("preset", "default"), "default") << impl;
    EXPECT_FALSE(r.stack.contains("grad_reduce_dtype")) << impl;
  }
}

namespace {

// The kernels of GPU 0's optimizer step.
std::vector<models::Kernel> update_on_gpu0(const results::Result& r) {
  for (const auto& t : r.plan.graph.tasks)
    if (t.category == taskgraph::Category::Optimizer && t.rank == 0) return r.plan.graph.works[static_cast<std::size_t>(t.work)].kernels;
  return {};
}

config::Scenario scenario_over(const std::string& json) {
  test::TempDir dir;
  dir.file("base.json", kBase);
  return config::load_scenario(dir.file("s.json", json));
}

}  // namespace

// distrib_optimizer.py's _copy_model_grads_to_main_grads: shard_main_param.grad =
// shard_model_grad.float(), a copy into fp32 when the buffer is bf16, the buffer itself when fp32.
TEST(GradBuffer, TheUpdateCastsABf16BuffersShardUpToFp32) {
  const auto s = scenario_over(R"({"extends": "base.json", "stack": {"preset": "megatron-te", "vocab_divisible_by": 0, "grad_reduce_dtype": "bf16"}})");
  const auto fp32 = update_on_gpu0(with_stack(R"({"preset": "megatron-te", "vocab_divisible_by": 0})"));
  const auto bf16 = results::simulate(s);
  const auto kernels = update_on_gpu0(bf16);
  ASSERT_EQ(fp32.size(), 1u);
  ASSERT_EQ(kernels.size(), 2u);
  EXPECT_EQ(kernels[1], fp32[0]);  // the same update, after the cast
  const auto& cast = kernels[0];
  EXPECT_EQ(cast.role, models::KernelRole::CastUp);
  EXPECT_DOUBLE_EQ(cast.elems, fp32[0].flops / 12);  // the update's parameters (Adam: 12 FLOPs each): the shard
  EXPECT_DOUBLE_EQ(cast.bytes, 6 * cast.elems);      // reads bf16, writes fp32
  // ATen's cast up runs unvectorised: priced at the device's measured cast-up rate, not its HBM's.
  ASSERT_GT(s.device.cast_up_bandwidth, 0.0);
  const double seconds = cost::quote_kernel(s.device, cast, "bf16").seconds;
  EXPECT_GE(seconds, cast.bytes / s.device.cast_up_bandwidth);
  EXPECT_LT(seconds, cast.bytes / s.device.cast_up_bandwidth + 20e-6);
  test::expect_parts_sum_to_step(bf16);
}

// scripts/gpu_train.py's Trainer holds bf16 gradients and casts each to fp32 before AdamW: the
// validation rows say so (grad_reduce_dtype "bf16"), and one GPU's step grows by the cast alone,
// in the replay and in the sweep's closed form alike.
TEST(GradBuffer, TheValidationRowsStepGrowsByTheCastInReplayAndClosedForm) {
  test::TempDir dir;
  const std::string row = test::source_dir() + "/scenarios/validation/h200-pytorch/llama3-8b-tp8-slice-eager.json";
  const auto load = [&](const char* dtype) {
    return config::load_scenario(dir.file(std::string(dtype) + ".json", R"({"extends": ")" + row +
                                          R"(", "stack": {"grad_reduce_dtype": ")" + dtype + R"("}, "simulation": {"backend": "analytical"}})"));
  };
  const auto as_run = load("bf16"), fp32 = load("fp32");
  const auto a = results::simulate(as_run), b = results::simulate(fp32);
  const auto kernels = update_on_gpu0(a);
  ASSERT_EQ(kernels.size(), 2u);
  EXPECT_NEAR(kernels[0].elems, 1.004e9, 0.001e9);  // every parameter of the slice (gpu_train.py counted 1,004,015,616)
  const double cast = cost::quote_kernel(as_run.device, kernels[0], "bf16").seconds;
  EXPECT_NEAR(a.breakdown.optimizer - b.breakdown.optimizer, cast, 1e-9);
  EXPECT_NEAR(a.step_time_s - b.step_time_s, cast, 1e-9);
  EXPECT_NEAR(results::ClosedForm(as_run).estimate(as_run).step_time_s, a.step_time_s, 1e-9 * a.step_time_s);
  EXPECT_EQ(a.memory.peak(), b.memory.peak());  // the peak comes before any gradient
}

// ZeRO 1-3 keep bf16 gradients and cast the flat partition up as the step takes it
// (stage_1_and_2.py: flatten(averaged_gradients).to(fp32)); BF16_Optimizer (no ZeRO) accumulates
// in fp32 as backward goes, and FSDP reduces into fp32: neither casts at the update.
TEST(GradBuffer, DeepSpeedsZeroCastsAtTheUpdateBf16OptimizerAndFsdpDoNot) {
  const auto zero1 = update_on_gpu0(test::simulate_over(kBase, R"({"extends": "base.json", "stack": {"preset": "deepspeed"},
      "parallelism": {"framework": "deepspeed"}})"));
  ASSERT_EQ(zero1.size(), 2u);
  EXPECT_EQ(zero1[0].role, models::KernelRole::CastUp);
  const auto bf16_optimizer = update_on_gpu0(test::simulate_over(kBase, R"({"extends": "base.json", "stack": {"preset": "deepspeed"},
      "parallelism": {"framework": "deepspeed", "zero_stage": 0}})"));
  ASSERT_EQ(bf16_optimizer.size(), 1u);
  EXPECT_NE(bf16_optimizer[0].role, models::KernelRole::CastUp);
  const auto fsdp = update_on_gpu0(test::simulate_over(kBase, R"({"extends": "base.json", "stack": {"preset": "pytorch-eager"},
      "parallelism": {"framework": "fsdp", "zero_stage": 3}})"));
  ASSERT_EQ(fsdp.size(), 1u);
  // fp16 prices its cast (and unscaling) in the update itself: no second cast.
  const auto fp16 = update_on_gpu0(test::simulate_over(kBase, R"({"extends": "base.json", "stack": {"preset": "deepspeed"},
      "parallelism": {"framework": "deepspeed"}, "training": {"precision": "fp16"}})"));
  EXPECT_EQ(fp16.size(), 1u);
}
