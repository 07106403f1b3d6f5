// Multi-token prediction (model.mtp_layers; DeepSeek-V3 report, arXiv:2412.19437, Sec. 2.2;
// Megatron-Core's MultiTokenPredictionLayer): after the last block, each module norms the next
// token's embedding and the previous depth's output, projects their concatenation from 2h to h,
// runs a transformer block and the model's head and loss again. The embedding table and the
// output layer are the model's: only the norms, the projection and the block add parameters.
#include <gtest/gtest.h>

#include "llama_spec.hpp"
#include "models/model_graph.hpp"
#include "scenario_helpers.hpp"
#include "sim/config/scenario.hpp"

using namespace dtsim;
using test::op_named;

namespace {

models::ModelGraph build(const models::TransformerSpec& s, std::int64_t tensor = 1) {
  return models::build_transformer(s, models::BuildOptions{2, 2, models::Attention::Flash, tensor, false});
}

}  // namespace

TEST(Mtp, OneModuleIsABlockWithItsOwnNormsProjectionAndTheSharedHead) {
  auto s = test::small_llama(2);  // hidden 1024, vocabulary 32,000, untied
  const auto plain = build(s);
  s.mtp_layers = 1;
  const auto mtp = build(s);
  ASSERT_EQ(mtp.layers.size(), plain.layers.size() + 1);
  const auto& m = mtp.layers[mtp.layers.size() - 2];  // before the head
  EXPECT_TRUE(m.mtp);
  EXPECT_EQ(m.kind, models::LayerKind::Block);
  EXPECT_EQ(mtp.layers.back().kind, models::LayerKind::Head);
  // Parameters: one more block, the 2h x h projection and three RMSNorms of h (enorm, hnorm and
  // the module's own final norm).
  const double h = 1024;
  EXPECT_DOUBLE_EQ(mtp.params() - plain.params(), plain.layers[2].params() + 2 * h * h + 3 * h);
  EXPECT_DOUBLE_EQ(op_named(m, "mtp.lm_head").params, 0.0);
  EXPECT_DOUBLE_EQ(op_named(m, "mtp.embedding").params, 0.0);
  // FLOPs: the block's, the projection's and the head's GEMMs again (2 x 512 tokens); the norms,
  // the loss and the lookup add element-wise FLOPs (0.2 % here).
  const double tokens = 2.0 * 512;
  const double head = 2.0 * tokens * h * 32000;
  EXPECT_NEAR(m.forward_flops(), plain.layers[2].forward_flops() + 2.0 * tokens * 2 * h * h + head, 0.005 * m.forward_flops());
  EXPECT_GT(m.forward_flops(), plain.layers[2].forward_flops() + 2.0 * tokens * 2 * h * h + head);
  // Its lookups share the embedding table: a pipeline's first and last stages sum its gradient.
  EXPECT_DOUBLE_EQ(plain.tied_params, 0.0);
  EXPECT_DOUBLE_EQ(mtp.tied_params, plain.layers.front().params());
  // Its loss is priced as a loss (by role), its kernels named as the head's.
  const auto& loss = op_named(m, "mtp.cross_entropy");
  EXPECT_EQ(loss.forward.front().role, models::KernelRole::LossForward);
  EXPECT_EQ(loss.forward.front().name, "cross_entropy");
}

// Under tensor parallelism the projection is column-parallel and the head vocabulary-parallel.
TEST(Mtp, SplitsAsTheModelsLayersDo) {
  auto s = test::small_llama(2);
  s.mtp_layers = 1;
  const auto one = build(s), four = build(s, 4);
  const auto& m1 = one.layers[one.layers.size() - 2];
  const auto& m4 = four.layers[four.layers.size() - 2];
  EXPECT_DOUBLE_EQ(op_named(m4, "mtp.eh_proj").params, op_named(m1, "mtp.eh_proj").params / 4);
  EXPECT_NEAR(m4.forward_flops(), m1.forward_flops() / 4, 1e-3 * m1.forward_flops());
}

// The modules sit on the last pipeline chunk with the head, not among the blocks stage_layers
// counts; a run with them is slower by about their work.
TEST(Mtp, RunsOnTheLastStage) {
  const std::string base = R"({"extends": "base.json", "model": {"preset": "llama-3-8b", "num_layers": 4, "seq_len": 1024)";
  const std::string rest = R"(}, "parallelism": {"data": 4, "pipeline": 2, "micro_batch_size": 1},
      "training": {"global_batch_size": 8, "attention": "flash"}, "simulation": {"backend": "analytical"}})";
  const auto plain = test::simulate_over_base(base + rest);
  const auto mtp = test::simulate_over_base(base + R"(, "mtp_layers": 1)" + rest);
  EXPECT_EQ(mtp.plan.stage_layers, plain.plan.stage_layers);
  EXPECT_GT(mtp.step_time_s, plain.step_time_s);
  EXPECT_GT(mtp.memory.params, plain.memory.params);  // the worst stage is the last, with the module
  test::expect_parts_sum_to_step(mtp);
  const auto error = test::input_error_over_base(R"({"extends": "base.json", "model": {"preset": "gpt2", "mtp_layers": 17}})");
  EXPECT_NE(error.find("/model/mtp_layers"), std::string::npos) << error;
}

// A pipeline's last stage builds its own copy of a shared embedding table (GPT-2's tied output
// layer; multi-token prediction's lookups) and keeps its states as of any of its parameters:
// bf16 weights, gradients and Adam's 12 bytes, 16 bytes a parameter without ZeRO.
TEST(Mtp, TheLastStageHoldsItsOwnCopyOfASharedTable) {
  const std::string base = R"({"extends": "base.json", "model": {"preset": "gpt2"}, "parallelism": {"data": 4, "micro_batch_size": 4, )";
  const auto piped = test::simulate_over_base(base + R"("pipeline": 2}, "simulation": {"backend": "analytical"}})");
  const auto& stages = piped.plan.stage_memory;
  ASSERT_EQ(stages.size(), 2u);
  // GPT-2's table: 50,257 x 768, plus 1,024 x 768 learned positions on the first stage.
  const double table = 50257.0 * 768 + 1024.0 * 768;
  const auto graph = piped.scenario_spec.model.build(models::BuildOptions{});
  double last_blocks = 0;
  for (std::size_t i = 7; i < graph.layers.size(); ++i) last_blocks += graph.layers[i].params();  // blocks 6..11 and the head
  EXPECT_DOUBLE_EQ(stages[1].params, 2 * (last_blocks + table));
  EXPECT_DOUBLE_EQ(stages[1].optimizer, 12 * (last_blocks + table));
  // On one stage the output layer reads the embedding's own table: no copy.
  const auto whole = test::simulate_over_base(
      R"({"extends": "base.json", "model": {"preset": "gpt2"}, "parallelism": {"data": 8, "micro_batch_size": 4},
          "simulation": {"backend": "analytical"}})");
  EXPECT_DOUBLE_EQ(whole.plan.stage_memory[0].params, 2 * graph.params());
}
