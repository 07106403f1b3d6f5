#include <gtest/gtest.h>

#include "models/model_graph.hpp"
#include "strategies/plan.hpp"
#include "strategies/works.hpp"
#include "sim/network/platform.hpp"
#include "sim/replay/replay.hpp"

#include <tuple>

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
  strategies::HostSpec host;
  strategies::Plan plan() const { return strategies::plan_training(graph, par, train, host); }
};

Setup setup(int dp, std::int64_t mb, std::int64_t global, int tp = 1, int pp = 1) {
  Setup s{models::build_transformer(small(), {mb, 2, models::Attention::Standard, tp, false}), {}, {}, {}};
  s.par.data = dp;
  s.par.tensor = tp;
  s.par.pipeline = pp;
  s.par.micro_batch = mb;
  s.train.global_batch = global;
  return s;
}

int count(const taskgraph::TaskGraph& g, taskgraph::CollectiveOp op) {
  int n = 0;
  for (const auto& t : g.tasks) n += t.is_collective && t.collective().op == op;
  return n;
}

std::vector<const models::Layer*> all_layers(const models::ModelGraph& g) {
  std::vector<const models::Layer*> v;
  for (const auto& l : g.layers) v.push_back(&l);
  return v;
}

}  // namespace

TEST(Buckets, FollowPyTorchDdpCaps) {
  auto s = setup(8, 4, 64);
  auto buckets = strategies::make_buckets(all_layers(s.graph), 2.0, 25.0 * (1 << 20), 1.0 * (1 << 20));
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

TEST(DataParallel, MicroBatchesAndFlopsFollowTheBatch) {
  auto s = setup(8, 4, 512);
  auto plan = s.plan();
  EXPECT_EQ(plan.micro_batches, 16);
  EXPECT_DOUBLE_EQ(plan.model_flops_per_step, s.graph.model_flops() * 512 / 4);
  EXPECT_EQ(count(plan.graph, taskgraph::CollectiveOp::AllReduce), static_cast<int>(plan.gradient_buckets));
}

TEST(DataParallel, OneGpuNeedsNoAllReduce) {
  auto s = setup(1, 4, 8);
  EXPECT_EQ(count(s.plan().graph, taskgraph::CollectiveOp::AllReduce), 0);
}

TEST(DataParallel, AllReduceCoversEveryReplica) {
  auto s = setup(8, 4, 32);
  auto plan = s.plan();
  for (const auto& t : plan.graph.tasks)
    if (t.is_collective) {
      ASSERT_EQ(t.collective().groups.size(), 1u);
      EXPECT_EQ(plan.graph.groups[static_cast<std::size_t>(t.collective().groups[0])].size(), 8u);
    }
}

TEST(DataParallel, WithoutOverlapEveryBucketWaitsForTheWholeBackward) {
  auto s = setup(4, 4, 16);
  s.par.overlap_grad_reduce = false;
  auto plan = s.plan();
  const auto& g = plan.graph;
  int last_backward = -1;
  for (std::size_t i = 0; i < g.tasks.size(); ++i)
    if (!g.tasks[i].is_collective && g.tasks[i].category == taskgraph::Category::Compute) last_backward = static_cast<int>(i);
  for (const auto& t : g.tasks) {
    if (!t.is_collective) continue;
    for (int d : t.deps) {
      if (!g.tasks[static_cast<std::size_t>(d)].is_collective) {
        EXPECT_EQ(d, last_backward);
      }
    }
  }
}

TEST(Recompute, FullAddsOneForwardOfTheBlocks) {
  auto s = setup(2, 2, 4);
  s.par.recompute = strategies::Recompute::Full;
  auto plan = s.plan();
  double block_fwd = 0;
  for (const auto& l : s.graph.layers)
    if (l.kind == models::LayerKind::Block)
      for (const auto& op : l.ops)
        if (op.matmul)
          for (const auto& k : op.forward) block_fwd += k.flops;
  EXPECT_DOUBLE_EQ(plan.hardware_flops_per_step - plan.model_flops_per_step, block_fwd * 2);
}

TEST(Recompute, SelectiveAddsOnlyTheAttentionScores) {
  auto s = setup(1, 2, 2);
  s.par.recompute = strategies::Recompute::Selective;
  auto plan = s.plan();
  // QK^T per layer: 2 b s^2 h FLOPs (Korthikanti et al. 2022, Sec. 5).
  const double expected = 12 * 2.0 * 2 * 1024.0 * 1024 * 768;
  EXPECT_DOUBLE_EQ(plan.hardware_flops_per_step - plan.model_flops_per_step, expected);
}

TEST(TensorParallel, FourAllReducesOfBshPerBlock) {
  auto s = setup(1, 2, 2, 4);
  const auto& block = s.graph.layers[1];
  double fwd = 0, bwd = 0;
  for (const auto& c : strategies::tensor_parallel_comms(block, true, s.par, 0)) {
    EXPECT_EQ(c.op, taskgraph::CollectiveOp::AllReduce);
    EXPECT_DOUBLE_EQ(c.bytes, 2.0 * 1024 * 768 * 2);  // b s h in 16-bit
    fwd += c.count;
  }
  for (const auto& c : strategies::tensor_parallel_comms(block, false, s.par, 0)) bwd += c.count;
  EXPECT_EQ(fwd, 2);
  EXPECT_EQ(bwd, 2);
}

TEST(TensorParallel, SequenceParallelTradesAllReducesForGatherScatterPairs) {
  auto s = setup(1, 2, 2, 4);
  s.par.sequence_parallel = true;
  double ag = 0, rs = 0;
  for (const auto& c : strategies::tensor_parallel_comms(s.graph.layers[1], true, s.par, 0))
    (c.op == taskgraph::CollectiveOp::AllGather ? ag : rs) += c.count;
  EXPECT_EQ(ag, 2);
  EXPECT_EQ(rs, 2);
}

TEST(TensorParallel, SlicesGemmsAndParametersByT) {
  auto whole = models::build_transformer(small(), {2, 2, models::Attention::Standard, 1, false});
  auto slice = models::build_transformer(small(), {2, 2, models::Attention::Standard, 4, false});
  // Exact but for the vocabulary, padded to a multiple of t as Megatron pads it (50257 -> 50260).
  EXPECT_NEAR(slice.model_flops() * 4 / whole.model_flops(), 1.0, 2e-5);
  EXPECT_NEAR(slice.layers[1].params() * 4 / whole.layers[1].params(), 1.0, 1e-12);
}

TEST(Pipeline, StagesGetEvenLayersAndPassActivations) {
  auto s = setup(1, 1, 8, 1, 4);
  auto plan = s.plan();
  EXPECT_EQ(plan.stage_layers, (std::vector<int>{3, 3, 3, 3}));
  // 8 micro-batches x 3 stage boundaries, forward and backward.
  EXPECT_EQ(count(plan.graph, taskgraph::CollectiveOp::SendRecv), 8 * 3 * 2);
}

TEST(Pipeline, GPipeHoldsEveryMicroBatch1F1BOnlyPipelineDepth) {
  auto s = setup(1, 1, 8, 1, 4);
  s.par.schedule = strategies::Schedule::GPipe;
  double gpipe = s.plan().stage_memory[1].activations;
  s.par.schedule = strategies::Schedule::OneFOneB;
  double f1b = s.plan().stage_memory[1].activations;
  // Stage 1 of 4: GPipe keeps 8 micro-batches, 1F1B keeps p - s = 3.
  EXPECT_NEAR(gpipe / f1b, 8.0 / 3.0, 1e-9);
}

namespace {

// Step time of a pipeline whose every pass takes `fwd` or `bwd` seconds and whose transfers are
// free, replayed by the analytical backend.
double uniform_pipeline_step(strategies::Schedule sched, int p, int m, int v, double fwd, double bwd) {
  models::TransformerSpec spec = small();
  spec.num_layers = p * v * 2;
  auto s = setup(1, 1, m, 1, p);
  s.graph = models::build_transformer(spec, {1, 2, models::Attention::Standard, 1, false});
  s.par.schedule = sched;
  s.par.virtual_stages = v;
  auto plan = s.plan();
  std::vector<double> seconds;
  for (const auto& w : plan.graph.works)
    seconds.push_back(w.name.rfind("fwd", 0) == 0 ? fwd : w.name.rfind("bwd", 0) == 0 ? bwd : 0.0);
  network::ClusterSpec c;
  c.nodes = p;
  c.intra_bandwidth = c.nic_bandwidth = 1e30;
  network::Platform pf(c);
  return replay::replay_analytical({plan.graph, seconds, pf}).makespan;
}

}  // namespace

TEST(PipelineBubble, OneFOneBAndGPipeMatchPMinusOneOverM) {
  for (auto sched : {strategies::Schedule::OneFOneB, strategies::Schedule::GPipe})
    for (auto [p, m] : {std::pair{4, 8}, {8, 32}, {4, 4}}) {
      double ideal = m * 3.0;
      double step = uniform_pipeline_step(sched, p, m, 1, 1.0, 2.0);
      EXPECT_NEAR((step - ideal) / ideal, strategies::bubble_fraction(sched, p, m, 1), 1e-9)
          << strategies::to_string(sched) << " p=" << p << " m=" << m;
    }
}

TEST(PipelineBubble, InterleavingDividesTheBubbleByV) {
  for (auto [p, m, v] : {std::tuple{4, 8, 2}, {4, 16, 4}, {8, 16, 2}}) {
    double ideal = m * v * 3.0;
    double step = uniform_pipeline_step(strategies::Schedule::Interleaved, p, m, v, 1.0, 2.0);
    EXPECT_NEAR((step - ideal) / ideal, (p - 1.0) / (v * m), 1e-9) << "p=" << p << " m=" << m << " v=" << v;
  }
}

TEST(PipelineBubble, NaiveSplitIdlesAllButOneStage) {
  double step = uniform_pipeline_step(strategies::Schedule::Naive, 4, 3, 1, 1.0, 2.0);
  EXPECT_NEAR(step, 3 * 4 * 3.0, 1e-9);  // each micro-batch crosses all 4 stages alone
}

TEST(Zero, ShardsOptimizerGradientsAndParametersInTurn) {
  double states[4];
  for (int z = 0; z < 4; ++z) {
    auto s = setup(8, 1, 8);
    s.par.zero_stage = z;
    auto m = s.plan().memory;
    states[z] = m.params + m.gradients + m.optimizer;
  }
  const double psi = setup(8, 1, 8).graph.params();
  EXPECT_DOUBLE_EQ(states[0], 16 * psi);
  EXPECT_DOUBLE_EQ(states[1], 4 * psi + 12 * psi / 8);
  EXPECT_DOUBLE_EQ(states[2], 2 * psi + 14 * psi / 8);
  EXPECT_DOUBLE_EQ(states[3], 16 * psi / 8);
}

TEST(Zero, Stage3GathersEveryLayerForwardAndBackward) {
  auto s = setup(4, 1, 8);
  s.par.zero_stage = 3;
  auto plan = s.plan();
  const int layers = static_cast<int>(s.graph.layers.size()), micro_batches = 2;
  EXPECT_EQ(count(plan.graph, taskgraph::CollectiveOp::AllGather), 2 * layers * micro_batches);
  EXPECT_EQ(count(plan.graph, taskgraph::CollectiveOp::ReduceScatter), layers * micro_batches);
  EXPECT_EQ(count(plan.graph, taskgraph::CollectiveOp::AllReduce), 0);
}

TEST(Offload, MovesOptimizerStateOffTheGpu) {
  auto s = setup(2, 1, 2);
  s.par.offload_optimizer = true;
  EXPECT_EQ(s.plan().memory.optimizer, 0.0);
}

namespace {
double wire_bytes(const strategies::Plan& plan, taskgraph::CollectiveOp op) {
  double b = 0;
  for (const auto& t : plan.graph.tasks)
    if (t.is_collective && t.collective().op == op) b += t.collective().bytes;
  return b;
}
}  // namespace

TEST(Compression, Int8SendsOneBytePerValueTopKGathersItsShare) {
  auto s = setup(8, 1, 8);
  const double plain = wire_bytes(s.plan(), taskgraph::CollectiveOp::AllReduce);
  EXPECT_DOUBLE_EQ(plain, 2.0 * s.graph.params());  // bf16 gradients
  s.par.compression = strategies::Compression::Int8;
  EXPECT_DOUBLE_EQ(wire_bytes(s.plan(), taskgraph::CollectiveOp::AllReduce), plain / 2);
  s.par.compression = strategies::Compression::TopK;
  s.par.topk_ratio = 0.01;
  // 1 % of values, 2-byte value + 4-byte index, from each of 8 ranks.
  EXPECT_NEAR(wire_bytes(s.plan(), taskgraph::CollectiveOp::AllGather), s.graph.params() * 0.01 * 6 * 8, 1.0);
  s.par.compression = strategies::Compression::Fp16;  // already 16-bit: nothing to gain
  EXPECT_DOUBLE_EQ(wire_bytes(s.plan(), taskgraph::CollectiveOp::AllReduce), plain);
}

TEST(GradAccumulation, SeparateAddsThreePassesOverTheGradientsFusedNone) {
  auto s = setup(1, 2, 8);
  const auto& block = s.graph.layers[1];
  auto bytes_of = [&](const taskgraph::Work& w) {
    double b = 0;
    for (const auto& k : w.kernels) b += k.name == "grad_accumulate" ? k.bytes : 0.0;
    return b;
  };
  // Read the bf16 gradient and the accumulator, write the accumulator: 3 x 2 bytes per parameter.
  EXPECT_DOUBLE_EQ(bytes_of(strategies::backward_work({&block}, s.graph, s.par, 0)), 3 * 2 * block.params());
  s.par.fused_grad_accumulation = true;
  EXPECT_EQ(bytes_of(strategies::backward_work({&block}, s.graph, s.par, 0)), 0.0);
}

TEST(Pipeline, TensorGroupsGatherTheScatteredActivationOnlyWithoutSequenceParallelism) {
  auto gathers = [](bool sp) {
    auto s = setup(1, 1, 4, 2, 2);
    s.par.sequence_parallel = sp;
    s.graph = models::build_transformer(small(), {1, 2, models::Attention::Standard, 2, sp});
    int n = 0;
    for (const auto& t : s.plan().graph.tasks) n += t.is_collective && t.label().rfind("gather send", 0) == 0;
    return n;
  };
  EXPECT_EQ(gathers(false), 4 * 2);  // 4 micro-batches, forward activation and backward gradient
  EXPECT_EQ(gathers(true), 0);
}

namespace {
// A 2-stage pipeline whose passes take 1 s and 2 s and whose stage-to-stage transfer takes `hop`
// seconds on the analytical network.
double two_stage_step(bool blocking, double hop) {
  auto s = setup(1, 1, 4, 1, 2);
  s.par.blocking_p2p = blocking;
  auto plan = s.plan();
  std::vector<double> seconds;
  for (const auto& w : plan.graph.works)
    seconds.push_back(w.name.rfind("fwd", 0) == 0 ? 1.0 : w.name.rfind("bwd", 0) == 0 ? 2.0 : 0.0);
  network::ClusterSpec c;
  c.nodes = 2;
  c.intra_latency = c.inter_latency = 0;
  for (const auto& t : plan.graph.tasks)
    if (t.is_collective && t.collective().op == taskgraph::CollectiveOp::SendRecv) c.nic_bandwidth = t.collective().bytes / hop;
  c.intra_bandwidth = c.nic_bandwidth;
  network::Platform pf(c);
  return replay::replay_analytical({plan.graph, seconds, pf}).makespan;
}
}  // namespace

TEST(Pipeline, BlockingSendsHoldTheSenderBack) {
  const double free = two_stage_step(false, 1e-9), overlapped = two_stage_step(false, 0.1),
               blocking = two_stage_step(true, 0.1);
  EXPECT_NEAR(free, 4 * 3.0 + 3.0, 1e-6);  // 1F1B, p = 2, m = 4: bubble (p-1)(f+b)
  EXPECT_GT(overlapped, free);  // transfers, and the tied embedding's all-reduce, now take time
  // Stage 0's second forward now waits for the first send; every later send hides in the 1F1B
  // wait for a gradient, so by hand the step grows by one hop.
  EXPECT_NEAR(blocking - overlapped, 0.1, 1e-6);
}
