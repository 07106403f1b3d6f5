#include <gtest/gtest.h>

#include "models/model_graph.hpp"
#include "strategies/data_parallel.hpp"

using namespace dtsim;

namespace {

models::TransformerSpec small() {
  models::TransformerSpec s;
  s.name = "small";
  s.num_layers = 12;
  s.hidden_size = 768;
  s.num_heads = 12;
  s.num_kv_heads = 12;
  s.ffn_hidden_size = 3072;
  s.seq_len = 1024;
  s.vocab_size = 50257;
  return s;
}

struct Setup {
  models::ModelGraph graph;
  strategies::ParallelismSpec par;
  strategies::TrainingSpec train;
};

Setup setup(int dp, std::int64_t mb, std::int64_t global) {
  Setup s{models::build_transformer(small(), {mb, 2, models::Attention::Standard}), {}, {}};
  s.par.data = dp;
  s.par.micro_batch = mb;
  s.train.global_batch = global;
  return s;
}

int collectives(const taskgraph::TaskGraph& g) {
  int n = 0;
  for (const auto& t : g.tasks) n += t.is_collective;
  return n;
}

}  // namespace

TEST(Buckets, FollowPyTorchDdpCaps) {
  auto s = setup(8, 4, 64);
  auto buckets = strategies::make_buckets(s.graph, 2.0, 25.0 * (1 << 20), 1.0 * (1 << 20));
  double total = 0;
  for (const auto& b : buckets) total += b.bytes;
  EXPECT_DOUBLE_EQ(total, 2.0 * s.graph.params());
  // The lm head is tied, so the first bucket holds the final norm: it must stay under 1 MiB.
  EXPECT_LE(buckets.front().bytes, 1.0 * (1 << 20));
  for (std::size_t i = 1; i + 1 < buckets.size(); ++i) EXPECT_LE(buckets[i].bytes, 25.0 * (1 << 20) + 1);
  for (std::size_t i = 1; i < buckets.size(); ++i) EXPECT_LE(buckets[i].ready_after_layer, buckets[i - 1].ready_after_layer);
  // The tied embedding is used first in forward, so its gradient is complete only at the end.
  EXPECT_EQ(buckets.back().ready_after_layer, 0);
}

TEST(DataParallel, AccumulationStepsAndFlopsFollowTheBatch) {
  auto s = setup(8, 4, 512);
  auto plan = strategies::plan_data_parallel(s.graph, s.par, s.train);
  EXPECT_EQ(plan.accumulation_steps, 16);
  EXPECT_DOUBLE_EQ(plan.model_flops_per_step, s.graph.model_flops() * 512 / 4);
  EXPECT_EQ(collectives(plan.graph), static_cast<int>(plan.buckets.size()));
}

TEST(DataParallel, OneGpuNeedsNoAllReduce) {
  auto s = setup(1, 4, 8);
  EXPECT_EQ(collectives(strategies::plan_data_parallel(s.graph, s.par, s.train).graph), 0);
}

TEST(DataParallel, WithoutOverlapEveryBucketWaitsForTheWholeBackward) {
  auto s = setup(4, 4, 16);
  s.par.overlap_grad_reduce = false;
  auto plan = strategies::plan_data_parallel(s.graph, s.par, s.train);
  const auto& g = plan.graph;
  for (const auto& t : g.tasks) {
    if (!t.is_collective) continue;
    for (int d : t.deps) {
      if (!g.tasks[static_cast<std::size_t>(d)].is_collective) {
        EXPECT_EQ(g.tasks[static_cast<std::size_t>(d)].label, "bwd embedding mb0");
      }
    }
  }
}

TEST(DataParallel, FullRecomputationAddsOneForwardOfTheBlocks) {
  auto s = setup(2, 2, 4);
  s.par.recompute = strategies::Recompute::Full;
  auto plan = strategies::plan_data_parallel(s.graph, s.par, s.train);
  double block_fwd = 0;
  for (const auto& l : s.graph.layers)
    if (l.kind == models::LayerKind::Block)
      for (const auto& op : l.ops)
        if (op.matmul)
          for (const auto& k : op.forward) block_fwd += k.flops;
  EXPECT_DOUBLE_EQ(plan.hardware_flops_per_step - plan.model_flops_per_step, block_fwd * 2);
}
