// Megatron-Core's checkpointed recompute modules (--recompute-modules mlp, moe, shared_experts)
// and mla_up_proj: which ops backward runs again and what each keeps, by hand; the tensor-parallel
// collectives and expert all-to-alls the re-run repeats; a step's memory and time against the step
// without them; and what Megatron-Core refuses (transformer_config.py).
#include <gtest/gtest.h>

#include <string>

#include "llama_spec.hpp"
#include "models/model_graph.hpp"
#include "moe_scenario.hpp"
#include "scenario_helpers.hpp"
#include "sim/core/errors.hpp"
#include "sim/results/result.hpp"
#include "strategies/recompute.hpp"
#include "strategies/works.hpp"

using namespace dtsim;
using test::op_named;
using test::small_moe;
namespace rm = models::recompute_module;
using strategies::Recompute;
using taskgraph::CollectiveOp;

namespace {

// Block 0 of `s` over micro-batches of 2 x 512 tokens in 2 bytes, flash attention.
models::Layer block(const models::TransformerSpec& s, std::uint8_t modules, int tensor = 1, bool sp = false, int expert_tensor = 0) {
  models::BuildOptions o{2, 2, models::Attention::Flash};
  o.recompute_modules = modules;
  o.tensor = tensor;
  o.sequence_parallel = sp;
  o.expert = s.moe() ? 2 : 1;
  o.expert_tensor = expert_tensor;
  return models::build_transformer(s, o).layers[1];
}

double dropped(const models::Layer& l) {
  double b = 0;
  for (const auto& op : l.ops) b += op.saved_bytes - op.saved_bytes_selective;
  return b;
}

std::vector<std::string> selective_ops(const models::Layer& l) {
  std::vector<std::string> out;
  for (const auto& op : l.ops)
    if (op.selective) out.push_back(op.name);
  return out;
}

constexpr double kTokens = 1024, kHidden = 1024, kBytes = 2;

}  // namespace

// mlp: the dense MLP's three ops again, keeping only its input (the normed hidden state): the
// SwiGLU's two inputs and the down projection's input are no longer kept.
TEST(RecomputeCheckpointedModules, MlpKeepsOnlyTheMlpInput) {
  const auto l = block(test::small_llama(2), rm::kGiven | rm::kMlp);
  EXPECT_EQ(selective_ops(l), (std::vector<std::string>{"mlp.gate_up", "mlp.swiglu", "mlp.fc2"}));
  EXPECT_DOUBLE_EQ(op_named(l, "mlp.gate_up").saved_bytes_selective, kTokens * kHidden * kBytes);
  EXPECT_DOUBLE_EQ(dropped(l), 3 * kTokens * 2816 * kBytes);
  EXPECT_EQ(l.rerun_tp_pairs, 1);
  // An MoE model's dense blocks only: its MoE blocks are the moe module's.
  EXPECT_TRUE(selective_ops(block(small_moe(0, false), rm::kGiven | rm::kMlp)).empty());
}

// moe: the router, permutation, experts, un-permutation and shared experts again, keeping the
// router's input; the norm before and the residual after stay as they are.
TEST(RecomputeCheckpointedModules, MoeCheckpointsTheWholeMoeLayer) {
  const auto l = block(small_moe(1, false), rm::kGiven | rm::kMoe);
  EXPECT_EQ(selective_ops(l), (std::vector<std::string>{"moe.router", "moe.topk", "moe.permute", "moe.experts.gate_up",
                                                        "moe.experts.swiglu", "moe.experts.down", "moe.unpermute",
                                                        "moe.shared.gate_up", "moe.shared.swiglu", "moe.shared.down"}));
  EXPECT_DOUBLE_EQ(op_named(l, "moe.router").saved_bytes_selective, kTokens * kHidden * kBytes);
  double module = 0;
  for (std::size_t i = l.experts.module; i < l.experts.module_end(); ++i) module += l.ops[i].saved_bytes;
  EXPECT_DOUBLE_EQ(dropped(l), module - kTokens * kHidden * kBytes);
  EXPECT_EQ(l.rerun_tp_pairs, 1);
  // Folded experts without shared ones run no tensor-parallel pair of their own to repeat.
  EXPECT_EQ(block(small_moe(0, false), rm::kGiven | rm::kMoe, 2, true, 1).rerun_tp_pairs, 0);
}

// shared_experts: the shared experts' MLP alone, keeping its input.
TEST(RecomputeCheckpointedModules, SharedExpertsAlone) {
  const auto l = block(small_moe(1, false), rm::kGiven | rm::kSharedExperts);
  EXPECT_EQ(selective_ops(l), (std::vector<std::string>{"moe.shared.gate_up", "moe.shared.swiglu", "moe.shared.down"}));
  EXPECT_DOUBLE_EQ(dropped(l), 3 * kTokens * 512 * kBytes);  // the SwiGLU's two inputs and the down projection's
  EXPECT_EQ(l.rerun_tp_pairs, 1);
}

// mla_up_proj: the query and key/value up-projections again; attention no longer keeps Q, K and
// V (16 heads of 64 + 32 for Q and K, 64 for V), only its output and log-sum-exp; with core_attn
// nothing.
TEST(RecomputeCheckpointedModules, MlaUpProjDropsQueriesKeysAndValues) {
  const auto s = small_moe(0, true);
  const auto l = block(s, rm::kGiven | rm::kMlaUpProj);
  EXPECT_EQ(selective_ops(l), (std::vector<std::string>{"mla.q_up", "mla.kv_up"}));
  const double q = kTokens * 16 * 96 * kBytes, v = kTokens * 16 * 64 * kBytes;
  const auto& fa = op_named(l, "flash_attention");
  EXPECT_DOUBLE_EQ(fa.saved_bytes - fa.saved_bytes_selective, 2 * q + v);
  EXPECT_DOUBLE_EQ(dropped(l), 2 * q + v);
  EXPECT_EQ(l.rerun_tp_pairs, 0);
  EXPECT_DOUBLE_EQ(op_named(block(s, rm::kGiven | rm::kMlaUpProj | rm::kCoreAttn), "flash_attention").saved_bytes_selective, 0.0);
}

// The re-run repeats the module's tensor-parallel pair: a gather and a reduce-scatter of the
// hidden state under sequence parallelism, one all-reduce without; nothing without the modules.
TEST(RecomputeCheckpointedModules, TheRerunRepeatsItsTensorParallelPair) {
  strategies::ParallelismSpec p;
  p.tensor = 2;
  p.sequence_parallel = true;
  const auto l = block(test::small_llama(2), rm::kGiven | rm::kMlp, 2, true);
  auto c = strategies::recompute_comms(l, Recompute::Selective, p, 0);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].op, CollectiveOp::AllGather);
  EXPECT_EQ(c[1].op, CollectiveOp::ReduceScatter);
  for (const auto& x : c) {
    EXPECT_EQ(x.count, 1);
    EXPECT_DOUBLE_EQ(x.bytes, kTokens * kHidden * kBytes);
  }
  p.sequence_parallel = false;
  c = strategies::recompute_comms(block(test::small_llama(2), rm::kGiven | rm::kMlp, 2), Recompute::Selective, p, 0);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].op, CollectiveOp::AllReduce);
  EXPECT_TRUE(strategies::recompute_comms(block(test::small_llama(2), rm::kGiven, 2), Recompute::Selective, p, 0).empty());
}

// A step on 8 GPUs, tensor 2 with sequence parallelism, one micro-batch: mlp keeps each block's
// MLP activations fewer but one block's, which backward rebuilds, runs the MLP forward and its
// two collectives again, and leaves the model FLOPs as they are.
TEST(RecomputeCheckpointedModules, AnMlpStepKeepsLessAndRunsMore) {
  auto run = [](const std::string& recompute) {
    return test::small_llama_step(R"("tensor": 2, "data": 4, "sequence_parallel": true, "micro_batch_size": 1, )" + recompute, 4);
  };
  const auto none = run(R"("recompute": "none")");
  const auto mlp = run(R"("recompute": "selective", "recompute_modules": ["mlp"])");
  const double per_block = 3 * 2048.0 * 1536 * 2;  // SwiGLU inputs (2 x ffn / 2) and the down projection's input
  EXPECT_NEAR(none.memory.activations - mlp.memory.activations, 3 * per_block, 1.0);
  EXPECT_GT(mlp.breakdown.compute, none.breakdown.compute);
  EXPECT_GT(mlp.hardware_flops, none.hardware_flops);
  EXPECT_DOUBLE_EQ(mlp.model_flops, none.model_flops);
  EXPECT_GT(mlp.step_time_s, none.step_time_s);
}

// Under expert parallelism moe runs each MoE layer's forward again before its backward, its two
// all-to-alls included: two more all-to-alls per layer and micro-batch, after the re-run's pieces.
TEST(RecomputeCheckpointedModules, MoeRerunsTheAllToAlls) {
  test::TempDir dir;
  auto run = [&](const std::string& extra) {
    const auto r = results::simulate(test::moe_scenario(dir, 2, R"("data": 16, "expert": 8, "micro_batch_size": 1)" + extra,
                                                        R"(, "shared_experts": 1)"));
    test::expect_parts_sum_to_step(r);
    return r;
  };
  const auto none = run(""), moe = run(R"(, "recompute": "selective", "recompute_modules": ["moe"])");
  auto count = [](const results::Result& r, bool collective, const std::string& part) {
    int n = 0;
    for (const auto& t : r.plan.graph.tasks) n += t.is_collective == collective && t.label().find(part) != std::string::npos;
    return n;
  };
  // 4 MoE layers x 4 micro-batches on the stage's GPU.
  EXPECT_EQ(count(moe, true, "recompute"), 2 * 4 * 4);
  EXPECT_EQ(count(moe, false, " recompute "), 3 * 4 * 4);
  EXPECT_EQ(count(none, true, "recompute"), 0);
  EXPECT_GT(moe.step_time_s, none.step_time_s);
  EXPECT_GT(moe.breakdown.exposed_communication, none.breakdown.exposed_communication);
  EXPECT_LT(moe.memory.activations, none.memory.activations);
  EXPECT_DOUBLE_EQ(moe.model_flops, none.model_flops);
}

// What Megatron-Core refuses together, and what would re-run nothing.
TEST(RecomputeCheckpointedModules, RefusedWithTheReason) {
  test::TempDir dir;
  auto error = [&](const std::string& parallelism, const std::string& model = "") {
    try {
      test::moe_scenario(dir, 2, R"("data": 16, "expert": 8, "micro_batch_size": 1, "recompute": "selective", )" + parallelism, model);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error(R"("recompute_modules": ["moe"], "moe_a2a_overlap": "megatron-1f1b")").find("drop \"moe\""), std::string::npos);
  EXPECT_NE(error(R"("recompute_modules": ["shared_experts"], "moe_shared_expert_overlap": true)", R"(, "shared_experts": 1)")
                .find("shared_experts recompute module"),
            std::string::npos);
  EXPECT_NE(error(R"("recompute_modules": ["mlp"])").find("did you mean \"moe\""), std::string::npos);
  EXPECT_EQ(error(R"("recompute_modules": ["moe", "moe_act", "layernorm"])"), "");
}
