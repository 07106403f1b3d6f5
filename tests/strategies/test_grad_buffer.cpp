// Megatron-LM's data-parallel gradient buffer under a Megatron stack (issue 30, items 1 and 3):
// fp32 main gradients held and reduced in fp32 unless --grad-reduce-in-bf16, in memory and on
// the wire alike; the key's refusals; `dtsim import megatron` mapping the flag.
#include <gtest/gtest.h>

#include <string>

#include "scenario_helpers.hpp"
#include "sim/config/import_run.hpp"
#include "sim/config/scenario.hpp"
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
