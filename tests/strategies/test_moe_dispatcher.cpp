// The token dispatcher of an MoE layer: NCCL's all-to-all of one row per token and expert, or
// DeepEP's, which sends a token once to each GPU (one node) or node (several) holding one of its
// experts: the bytes by hand, and a step's all-to-all time following them.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "helpers.hpp"
#include "scenario_helpers.hpp"
#include "sim/results/result.hpp"
#include "strategies/units/units.hpp"

using namespace dtsim;
using Dispatcher = strategies::ParallelismSpec::MoeDispatcher;

namespace {

// C(n - m, k) / C(n, k) through log-gamma: the chance that none of k of n experts is among m.
double none_among(double n, double m, double k) {
  auto log_choose = [](double a, double b) { return std::lgamma(a + 1) - std::lgamma(b + 1) - std::lgamma(a - b + 1); };
  return n - m < k ? 0.0 : std::exp(log_choose(n - m, k) - log_choose(n, k));
}

// One MoE layer's dispatch as built for an expert-parallel group: `tokens` of `hidden` 2-byte
// values, top-k of `experts`, `gpus` of them sharing the experts evenly.
models::Layer moe_layer(double tokens, double hidden, int experts, int k, int gpus) {
  models::Layer l;
  l.experts.first = 0;
  l.experts.last = 1;
  l.experts.dispatch_bytes = tokens * k * hidden * 2;
  l.experts.local_experts = experts / gpus;
  l.experts.active_share = static_cast<double>(k) / experts;
  return l;
}

// Qwen3-30B-A3B cut to `layers` blocks of 1,024 tokens on two DGX H100s, data 16 and expert 16,
// with `parallelism` and `training` keys added, analytical.
results::Result qwen3_on_two_nodes(const test::TempDir& dir, int layers, const std::string& parallelism, const std::string& training) {
  const std::string json = R"({"name": "moe", "model": {"preset": "qwen3-30b-a3b", "num_layers": )" + std::to_string(layers) +
                           R"(, "seq_len": 1024}, "hardware": {"device": "h100-sxm-80gb"}, "cluster": {"preset": "dgx-h100", "nodes": 2},
      "parallelism": {"data": 16, "expert": 16, "micro_batch_size": 4)" + parallelism + R"(},
      "training": {"global_batch_size": 64, "attention": "flash")" + training + R"(}, "simulation": {"backend": "analytical"}})";
  return results::simulate(config::load_scenario(dir.file("moe" + std::to_string(std::hash<std::string>{}(json)) + ".json", json)));
}

}  // namespace

TEST(MoeDispatcher, DeepEpSendsATokenOncePerGpuOrNode) {
  strategies::ParallelismSpec nccl, deepep;
  deepep.moe_dispatcher = Dispatcher::DeepEp;
  const double tokens = 4096, hidden = 4096, row = tokens * hidden * 2;
  // 128 experts, top-8, over 8 GPUs of one node: each GPU gets a token unless none of its 16
  // experts is among the 8 chosen.
  const auto one_node = moe_layer(tokens, hidden, 128, 8, 8);
  EXPECT_DOUBLE_EQ(strategies::moe_dispatch_bytes(nccl, one_node, 8, 1), 8 * row);
  EXPECT_NEAR(strategies::moe_dispatch_bytes(deepep, one_node, 8, 1) / (8 * row * (1 - none_among(128, 16, 8))), 1.0, 1e-12);
  // 256 experts, top-8, over 64 GPUs on 8 nodes: once to each node holding one (32 experts each).
  const auto eight_nodes = moe_layer(tokens, hidden, 256, 8, 64);
  EXPECT_NEAR(strategies::moe_dispatch_bytes(deepep, eight_nodes, 64, 8) / (8 * row * (1 - none_among(256, 32, 8))), 1.0, 1e-12);
  // DeepSeek-V3's node-limited routing, at most 4 of the 8 nodes: the 8 experts among their 128.
  deepep.moe_node_limit = 4;
  EXPECT_NEAR(strategies::moe_dispatch_bytes(deepep, eight_nodes, 64, 8) / (4 * row * (1 - none_among(128, 32, 8))), 1.0, 1e-12);
  deepep.moe_node_limit = 0;
  // Mixtral's top-2 of 8 experts, one a GPU: two GPUs a token either way.
  const auto mixtral = moe_layer(tokens, hidden, 8, 2, 8);
  EXPECT_NEAR(strategies::moe_dispatch_bytes(deepep, mixtral, 8, 1), strategies::moe_dispatch_bytes(nccl, mixtral, 8, 1),
              1e-6 * row);
}

// Qwen3-30B-A3B's 128 experts, top-8, expert parallelism 16 over two DGX H100s: DeepEP's
// all-to-alls carry 2 x (1 - C(64, 8) / C(128, 8)) rows a token where NCCL's carry 8, and take
// that much less time.
TEST(MoeDispatcher, AStepsAllToAllsFollowTheBytes) {
  test::TempDir dir;
  auto run = [&](const std::string& dispatcher) {
    const auto r = qwen3_on_two_nodes(dir, 4, dispatcher, "");
    test::expect_parts_sum_to_step(r);
    return r;
  };
  const auto nccl = run(""), deepep = run(R"(, "moe_dispatcher": "deepep")");
  const double ratio = 2 * (1 - none_among(128, 64, 8)) / 8;
  ASSERT_GT(nccl.all_to_all_s, 0.0);
  EXPECT_NEAR(deepep.all_to_all_s / nccl.all_to_all_s, ratio, 0.1 * ratio);
  EXPECT_LT(deepep.step_time_s, nccl.step_time_s);
  EXPECT_DOUBLE_EQ(deepep.model_flops, nccl.model_flops);
}

TEST(MoeDispatcher, NeedsExpertParallelism) {
  const auto error = test::input_error_over_base(
      R"({"extends": "base.json", "model": {"preset": "mixtral-8x7b"}, "parallelism": {"data": 8, "moe_dispatcher": "deepep"}})");
  EXPECT_NE(error.find("/parallelism/moe_dispatcher"), std::string::npos) << error;
  EXPECT_NE(error.find("expert > 1"), std::string::npos) << error;
}

// moe_dispatch_dtype "fp8": the all-to-alls toward the experts (forward dispatch, backward
// combine's gradient) carry a byte an element and a scale per 32 (1.03125 bytes against bf16's 2);
// those back from the experts (forward combine, backward dispatch's gradient) stay bf16.
TEST(MoeDispatcher, Fp8DispatchHalvesTheBytesTowardTheExperts) {
  test::TempDir dir;
  auto run = [&](const std::string& extra) { return qwen3_on_two_nodes(dir, 2, extra, R"(, "precision": "fp8")"); };
  const auto bf16 = run(""), fp8 = run(R"(, "moe_dispatch_dtype": "fp8")");
  // By direction: the labels' "dispatch " and "combine grad " go toward the experts.
  auto bytes = [](const results::Result& r, bool toward) {
    double sum = 0;
    for (const auto& t : r.plan.graph.tasks) {
      if (!t.is_collective || t.collective().op != taskgraph::CollectiveOp::AllToAll) continue;
      const std::string& l = t.label();
      const bool to = l.rfind("combine grad ", 0) == 0 || (l.rfind("dispatch ", 0) == 0 && l.rfind("dispatch grad ", 0) != 0);
      if (to == toward) sum += t.collective().bytes;
    }
    return sum;
  };
  ASSERT_GT(bytes(bf16, true), 0.0);
  ASSERT_GT(bytes(bf16, false), 0.0);
  EXPECT_DOUBLE_EQ(bytes(bf16, true), bytes(bf16, false));
  EXPECT_DOUBLE_EQ(bytes(fp8, true), bytes(bf16, true) * 1.03125 / 2);
  EXPECT_DOUBLE_EQ(bytes(fp8, false), bytes(bf16, false));
  EXPECT_LT(fp8.all_to_all_s, bf16.all_to_all_s);
  EXPECT_LT(fp8.step_time_s, bf16.step_time_s);
  test::expect_parts_sum_to_step(fp8);
}

TEST(MoeDispatcher, Fp8DispatchNeedsFp8TrainingAndExperts) {
  const auto bf16 = test::input_error_over_base(R"({"extends": "base.json", "model": {"preset": "mixtral-8x7b"},
      "parallelism": {"data": 8, "expert": 8, "moe_dispatch_dtype": "fp8"}})");
  EXPECT_NE(bf16.find("/parallelism/moe_dispatch_dtype"), std::string::npos) << bf16;
  EXPECT_NE(bf16.find("training.precision \"fp8\""), std::string::npos) << bf16;
  const auto dense = test::input_error_over_base(R"({"extends": "base.json", "model": {"preset": "mixtral-8x7b"},
      "parallelism": {"data": 8, "moe_dispatch_dtype": "fp8"}, "training": {"global_batch_size": 64, "precision": "fp8"}})");
  EXPECT_NE(dense.find("expert > 1"), std::string::npos) << dense;
}
