// CNNs through the whole pipeline: memory at fp64 (the seeds' Inception-v3 sizing) and
// data-parallel ResNet-50 steps.
#include <gtest/gtest.h>

#include "helpers.hpp"
#include "models/cnn.hpp"
#include "sim/config/scenario.hpp"
#include "sim/results/result.hpp"

using namespace dtsim;

namespace {
config::Scenario shipped(const std::string& name) { return config::load_scenario(test::source_dir() + "/scenarios/" + name); }
}  // namespace

TEST(CnnMemory, InceptionV3AtFp64BatchSizeTheSeedsWay) {
  const auto s = shipped("cnn/inception-v3-fp64-memory.json");
  const auto r = results::memory_only(s);
  // The seed: 24 M parameters at 8 bytes are 192 MB of weights (23.83 M here: 190.7 MB).
  EXPECT_NEAR(r.memory.params / 192e6, 1.0, 0.01);
  EXPECT_DOUBLE_EQ(r.memory.params, r.params * 8);
  EXPECT_DOUBLE_EQ(r.memory.gradients, r.params * 8);   // fp64 gradients
  EXPECT_DOUBLE_EQ(r.memory.optimizer, r.params * 8);   // SGD momentum in fp64
  // Activations: what the 256-image batch keeps for backward, each tensor once, in fp64.
  const auto g = s.model.build(models::BuildOptions{256, 8});
  double kept = 0;
  for (const auto& l : g.layers) kept += l.saved_bytes();
  EXPECT_DOUBLE_EQ(r.memory.activations, kept);
  EXPECT_NEAR(r.memory.activations / 49.1e9, 1.0, 0.01);
  // Of which the layer outputs, one tensor per convolution at fp64: 18.4 GB.
  double conv_outputs = 0;
  for (const auto& op : s.model.as<models::CnnSpec>()->ops)
    if (op.kind == models::CnnOpKind::Conv) conv_outputs += 256.0 * 8 * static_cast<double>(op.out.elems());
  EXPECT_NEAR(conv_outputs / 18.37e9, 1.0, 0.01);
}

TEST(CnnTraining, ResNet50DataParallelStepOnADgxA100) {
  auto s = shipped("cnn/resnet50-8xa100.json");
  s.backend = config::Backend::Analytical;
  const auto r = results::simulate(s);
  EXPECT_TRUE(r.fits);
  EXPECT_GT(r.samples_per_s, 0);
  EXPECT_EQ(r.tokens_per_s, 0);  // images carry no tokens
  // Model FLOPs: 3 x 2 x 4.089 G multiply-adds per image, 2,048 images per step.
  EXPECT_NEAR(r.model_flops, 6.0 * models::cnn_forward_macs(*s.model.as<models::CnnSpec>()) * 2048, 1e3);
  // The gradients cross the network once per step: bf16, every parameter, in DDP's buckets.
  double reduced = 0;
  for (const auto& t : r.plan.graph.tasks)
    if (t.is_collective && t.collective().op == taskgraph::CollectiveOp::AllReduce) reduced += t.collective().bytes;
  EXPECT_DOUBLE_EQ(reduced, 2.0 * r.params);
  EXPECT_NEAR(r.breakdown.total(), r.step_time_s, 1e-9);
  const auto json = results::to_json(r, false);
  EXPECT_FALSE(json["throughput"].contains("tokens_per_s"));
  EXPECT_EQ(json["model"]["image_size"], 224);
}

TEST(CnnPipeline, GPipeRematerialisationKeepsOnlyEachPartitionsInput) {
  // GPipe, K = 2, M = 32 micro-batches of 40 images: all forwards run before the backwards, so
  // a partition keeps 32 inputs, and rebuilds one micro-batch's activations at a time.
  const auto s = shipped("cnn/gpipe-amoebanet-d-k2.json");
  ASSERT_EQ(s.parallelism.recompute, strategies::Recompute::Stage);
  const auto r = results::memory_only(s);
  ASSERT_TRUE(r.fits);
  const auto g = s.model.build(models::BuildOptions{40, 2});
  ASSERT_EQ(r.plan.stage_layers, (std::vector<int>{9, 15}));
  auto saved = [&](std::size_t from, std::size_t to) {
    double b = 0;
    for (std::size_t l = from; l < to; ++l) b += g.layers[l].saved_bytes();
    return b;
  };
  const auto& head = g.layers.back();
  ASSERT_EQ(head.kind, models::LayerKind::Head);
  EXPECT_DOUBLE_EQ(r.plan.stage_memory[0].activations, 32 * g.layers[0].input_bytes + saved(0, 9));
  EXPECT_DOUBLE_EQ(r.plan.stage_memory[1].activations, 32 * (g.layers[9].input_bytes + head.saved_bytes()) + saved(9, 24));
  // Per-block checkpoints (recompute "full") keep every block's input of every micro-batch.
  auto full = s;
  full.parallelism.recompute = strategies::Recompute::Full;
  EXPECT_GT(results::memory_only(full).plan.stage_memory[0].activations, 2 * r.plan.stage_memory[0].activations);
}
