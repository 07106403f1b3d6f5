// Parallel layers (GPT-J; PaLM, Chowdhery et al. 2022, Sec. 2): y = x + attn(norm(x)) + mlp(norm(x)).
// One norm per block, the two input projections as one GEMM and the two output projections as
// one, and under tensor parallelism one partial sum each way where a sequential block has two.
#include <gtest/gtest.h>

#include <algorithm>

#include "models/model_graph.hpp"
#include "llama_spec.hpp"
#include "scenario_helpers.hpp"

using namespace dtsim;
using test::op_named;

namespace {

// The small Llama made PaLM-shaped: multi-query attention and LayerNorm.
models::TransformerSpec palm_like() {
  auto s = test::small_llama(2);
  s.name = "palm-like";
  s.num_kv_heads = 1;
  s.norm = models::Norm::LayerNorm;
  return s;
}

models::ModelGraph build(const models::TransformerSpec& s, std::int64_t tensor = 1) {
  return models::build_transformer(s, models::BuildOptions{2, 2, models::Attention::Flash, tensor, tensor > 1});
}

}  // namespace

TEST(ParallelLayers, OneNormFewerAndTheSameMatmuls) {
  auto s = palm_like();
  const auto sequential = build(s);
  s.parallel_layers = true;
  const auto parallel = build(s);
  // Each block drops its second LayerNorm, a weight and a bias of 1,024.
  EXPECT_DOUBLE_EQ(sequential.params() - parallel.params(), 2.0 * (2 * 1024));
  EXPECT_DOUBLE_EQ(sequential.model_flops(), parallel.model_flops());
  const auto& block = parallel.layers[1];
  const auto norms = std::count_if(block.ops.begin(), block.ops.end(), [](const models::Op& o) { return o.name.starts_with("norm"); });
  EXPECT_EQ(norms, 1);
  // Q of 16 heads of 64, one K and one V, the gate and the up projection: one GEMM from the norm.
  const auto& in = op_named(block, "attention_mlp.in").forward.at(0);
  EXPECT_EQ(in.k, 1024);
  EXPECT_EQ(in.n, (16 + 2) * 64 + 2 * 2816);
  EXPECT_EQ(in.m, 2 * 512);
  // The attention context and the MLP's activation through one output GEMM.
  const auto& out = op_named(block, "attention_mlp.out").forward.at(0);
  EXPECT_EQ(out.k, 16 * 64 + 2816);
  EXPECT_EQ(out.n, 1024);
}

TEST(ParallelLayers, BothBranchesShareOneSavedInput) {
  auto s = palm_like();
  const auto sequential = build(s);
  s.parallel_layers = true;
  const auto parallel = build(s);
  // What the sequential block keeps and the parallel one does not: the second norm's input, the
  // MLP's own copy of its normed input, and the second residual's.
  const auto& seq = sequential.layers[1];
  const double gone = op_named(seq, "norm2").saved_bytes + op_named(seq, "mlp.gate_up").saved_bytes +
                      op_named(seq, "mlp.residual").saved_bytes;
  EXPECT_GT(gone, 0.0);
  EXPECT_DOUBLE_EQ(seq.saved_bytes() - parallel.layers[1].saved_bytes(), gone);
}

TEST(ParallelLayers, TensorParallelSumsOncePerPass) {
  auto s = palm_like();
  s.parallel_layers = true;
  const auto split = build(s, 4).layers[1].tensor_split;
  EXPECT_EQ(split.forward_sums, 1);
  EXPECT_EQ(split.backward_sums, 1);
  EXPECT_EQ(split.forward_gathers, 1);
  EXPECT_EQ(split.backward_gathers, 2);
  // On one node under tensor parallelism alone every collective blocks the stream: each block
  // all-reduces once forward and once backward where a sequential block does twice. With A one
  // such all-reduce and E the embedding's and head's, 4 sequential blocks expose E + 16 A, 4
  // parallel ones E + 8 A, 8 parallel ones E + 16 A.
  const std::string scenario = R"({"extends": "base.json",
    "model": {"kind": "transformer", "num_layers": LAYERS, "hidden_size": 2048, "num_heads": 16, "num_kv_heads": 1,
              "ffn_hidden_size": 8192, "seq_len": 1024, "vocab_size": 32000, "mlp": "swiglu", "linear_bias": false,
              "position_embedding": "rotary", "dropout": false, "parallel_layers": PARALLEL},
    "cluster": {"gpus_per_node": 4, "inter_node": {"nics_per_node": 4}}, "parallelism": {"data": 1, "tensor": 4, "micro_batch_size": 1},
    "training": {"global_batch_size": 1, "attention": "flash"},
    "simulation": {"backend": "analytical"}})";
  auto exposed = [&](const char* layers, const char* parallel) {
    std::string json = scenario;
    json.replace(json.find("LAYERS"), 6, layers);
    json.replace(json.find("PARALLEL"), 8, parallel);
    const auto r = test::simulate_over_base(json);
    test::expect_parts_sum_to_step(r);
    return r.breakdown.exposed_communication;
  };
  const double seq4 = exposed("4", "false"), par4 = exposed("4", "true"), par8 = exposed("8", "true");
  const double a = (par8 - par4) / 8.0;
  ASSERT_GT(a, 0.0);
  EXPECT_NEAR(seq4 - par4, 8.0 * a, 1e-9 * seq4);
}

TEST(ParallelLayers, RefusedWhereBlocksRunInSequence) {
  const auto error = test::input_error_over_base(R"({"extends": "base.json", "model": {"preset": "mixtral-8x7b", "parallel_layers": true}})");
  EXPECT_NE(error.find("/model/parallel_layers"), std::string::npos) << error;
  EXPECT_NE(error.find("dense blocks"), std::string::npos) << error;
}

TEST(ParallelLayers, PalmPresetHasItsPublishedParameterCount) {
  const auto spec = *config::load_model_preset("palm-540b").transformer();
  EXPECT_TRUE(spec.parallel_layers);
  // Chowdhery et al. 2022, Table 1: 540.35 B parameters.
  EXPECT_NEAR(build(spec).params() / 540.35e9, 1.0, 0.001);
}
