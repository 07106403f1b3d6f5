// The family-neutral op graph: what strategies read from a model, and nothing else.
#include <gtest/gtest.h>

#include "models/model.hpp"
#include "strategies/plan.hpp"
#include "strategies/works.hpp"

using namespace dtsim;

namespace {

models::TransformerSpec small() {
  models::TransformerSpec s;
  s.name = "small";
  s.num_layers = 4;
  s.hidden_size = 256;
  s.num_heads = 8;
  s.num_kv_heads = 8;
  s.ffn_hidden_size = 1024;
  s.seq_len = 128;
  s.vocab_size = 1000;
  return s;
}

strategies::ParallelismSpec pipeline(int stages, int tensor = 1) {
  strategies::ParallelismSpec p;
  p.pipeline = stages;
  p.tensor = tensor;
  return p;
}

strategies::Plan plan(const models::ModelGraph& g, const strategies::ParallelismSpec& p, std::int64_t global = 2) {
  strategies::TrainingSpec t;
  t.global_batch = global;
  return strategies::plan_training(g, p, t, {});
}

std::vector<double> bytes_of(const strategies::Plan& plan, const std::string& label_prefix) {
  std::vector<double> out;
  for (const auto& t : plan.graph.tasks)
    if (t.is_collective && t.label().rfind(label_prefix, 0) == 0) out.push_back(t.collective().bytes);
  return out;
}

}  // namespace

TEST(OpGraph, ConvolutionIsOneImplicitGemmPerPass) {
  // ResNet-50's first convolution on one 224 x 224 image: 64 filters of 7 x 7 x 3, stride 2,
  // padding 3, so 112 x 112 outputs: 118.0 M multiply-adds (He et al. 2016, Table 1 row conv1).
  models::ConvShape c{1, 3, 224, 224, 64, 7, 7, 2, 2, 3, 3, 1};
  const auto f = models::conv_kernel("conv1", c, models::ConvPass::Forward, 2);
  EXPECT_EQ(f.kind, models::KernelKind::Conv);
  EXPECT_EQ(f.m, 112 * 112);  // N*P*Q
  EXPECT_EQ(f.n, 64);         // K
  EXPECT_EQ(f.k, 3 * 7 * 7);  // C*R*S
  EXPECT_DOUBLE_EQ(f.flops, 2.0 * 12544 * 64 * 147);
  EXPECT_DOUBLE_EQ(f.bytes, 2.0 * (3 * 224 * 224 + 64 * 147 + 64 * 12544));
  // Both backward GEMMs do the forward's work: the input gradient and the weight gradient.
  EXPECT_DOUBLE_EQ(models::conv_kernel("d", c, models::ConvPass::Dgrad, 2).flops, f.flops);
  const auto w = models::conv_kernel("w", c, models::ConvPass::Wgrad, 2);
  EXPECT_DOUBLE_EQ(w.flops, f.flops);
  EXPECT_EQ(w.k, 12544);  // reduced over every output position
  // Depthwise (one group per channel): 32 groups of one channel each.
  models::ConvShape dw{2, 32, 16, 16, 32, 3, 3, 1, 1, 1, 1, 32};
  const auto d = models::conv_kernel("dw", dw, models::ConvPass::Forward, 4);
  EXPECT_EQ(d.batch, 32);
  EXPECT_EQ(d.n, 1);
  EXPECT_EQ(d.k, 9);
  EXPECT_DOUBLE_EQ(d.flops, 2.0 * 2 * 16 * 16 * 32 * 9);
}

TEST(OpGraph, StageTransfersCarryTheTensorTheLastLayerHandsOn) {
  auto g = models::build_transformer(small(), {2, 2, models::Attention::Standard, 1, false});
  // Two stages of two blocks: the boundary follows block 1 (layers: embedding, blocks 0-3, head).
  ASSERT_EQ(g.layers[2].name, "block.1");
  EXPECT_DOUBLE_EQ(g.layers[2].output_bytes, 2.0 * 128 * 256 * 2);  // b s h in 16-bit
  g.layers[2].output_bytes = 12345;
  const auto p = plan(g, pipeline(2));
  for (const char* what : {"send act", "send grad"}) {
    const auto sent = bytes_of(p, what);
    ASSERT_EQ(sent.size(), 2u) << what;  // two micro-batches
    for (double b : sent) EXPECT_DOUBLE_EQ(b, 12345) << what;
  }
}

TEST(OpGraph, TensorCollectivesFollowTheLayersSplitRule) {
  auto g = models::build_transformer(small(), {1, 2, models::Attention::Standard, 2, false});
  auto& block = g.layers[1];
  block.tensor_split = {true, 1000, 3, 1, 0, 0, {}, {}};
  const auto p = pipeline(1, 2);
  const auto fwd = strategies::tensor_parallel_comms(block, true, p, 0);
  ASSERT_EQ(fwd.size(), 1u);
  EXPECT_EQ(fwd[0].op, taskgraph::CollectiveOp::AllReduce);
  EXPECT_DOUBLE_EQ(fwd[0].bytes, 1000);
  EXPECT_DOUBLE_EQ(fwd[0].count, 3);
  block.tensor_split = {true, 1000, 0, 0, 0, 0, {}, {}};
  EXPECT_TRUE(strategies::tensor_parallel_comms(block, true, p, 0).empty());
}

TEST(OpGraph, OnlyTiedParametersAreSummedBetweenFirstAndLastStage) {
  auto g = models::build_transformer(small(), {1, 2, models::Attention::Standard, 1, false});
  // The embedding op's parameters: the shared vocabulary table, and (as dtsim has always counted
  // it) the learned position table beside it.
  EXPECT_DOUBLE_EQ(g.tied_params, (1000.0 + 128) * 256);
  auto embedding_sync = [](const models::ModelGraph& graph) { return bytes_of(plan(graph, pipeline(2)), "embedding all_reduce"); };
  g.tied_params = 777;
  ASSERT_EQ(embedding_sync(g).size(), 1u);
  EXPECT_DOUBLE_EQ(embedding_sync(g)[0], 777 * strategies::grad_bytes_per_param(strategies::Precision::Bf16));
  g.tied_params = 0;
  EXPECT_TRUE(embedding_sync(g).empty());
}

TEST(OpGraph, ModelSpecAnswersNeutralQuestions) {
  models::ModelSpec m{"small", models::transformer_family(small())};
  EXPECT_STREQ(m.kind(), "transformer");
  EXPECT_EQ(m.blocks(), 4);
  EXPECT_EQ(m.tokens_per_sample(), 128);
  EXPECT_EQ(m.tensor_split_error(4), "");
  EXPECT_EQ(m.tensor_split_error(3), "3 does not divide model.num_heads (8)");
  EXPECT_DOUBLE_EQ(m.build({1, 2, models::Attention::Standard, 1, false}).params(),
                   models::build_transformer(small(), {1, 2, models::Attention::Standard, 1, false}).params());
}
