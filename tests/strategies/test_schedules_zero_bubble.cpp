// Issue 17 item 4: ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024), the
// backward split into its input-gradient pass B and weight-gradient pass W.
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>

#include "models/model_graph.hpp"
#include "scenario_helpers.hpp"
#include "sim/network/platform.hpp"
#include "sim/replay/replay.hpp"
#include "strategies/plan.hpp"
#include "strategies/works.hpp"

using namespace dtsim;
using strategies::Schedule;

namespace {

models::ModelGraph graph(int layers) {
  models::TransformerSpec s;
  s.name = "small";
  s.num_layers = layers;
  s.hidden_size = 768;
  s.num_heads = 12;
  s.num_kv_heads = 12;
  s.ffn_hidden_size = 3072;
  s.seq_len = 1024;
  s.vocab_size = 50257;
  return models::build_transformer(s, {1, 2, models::Attention::Standard, 1, false});
}

strategies::Plan plan(const models::ModelGraph& g, Schedule sched, int p, int m) {
  strategies::ParallelismSpec par;
  par.pipeline = p;
  par.schedule = sched;
  strategies::TrainingSpec t;
  t.global_batch = m;
  return strategies::plan_training(g, par, t, {});
}

// Step time of a pipeline whose forwards take tf, input-gradient passes tb and weight-gradient
// passes tw (whole backwards tb + tw), everything else free, on the analytical backend.
double uniform_step(Schedule sched, int p, int m, double tf, double tb, double tw) {
  const auto g = graph(2 * p);
  const auto pl = plan(g, sched, p, m);
  std::vector<double> seconds;
  auto starts = [](const std::string& s, const char* with) { return s.rfind(with, 0) == 0; };
  for (const auto& w : pl.graph.works)
    seconds.push_back(starts(w.name, "fwd")          ? tf
                      : starts(w.name, "bwd input")  ? tb
                      : starts(w.name, "bwd weight") ? tw
                      : starts(w.name, "bwd")        ? tb + tw
                                                     : 0.0);
  network::ClusterSpec c;
  c.nodes = p;
  c.intra_bandwidth = c.nic_bandwidth = 1e30;
  c.intra_latency = c.inter_latency = 0;
  network::Platform pf(c);
  return replay::replay_analytical({pl.graph, seconds, pf}).makespan;
}

}  // namespace

TEST(ZeroBubbleWork, BackwardSplitsIntoInputAndWeightGradientPasses) {
  const auto g = graph(2);
  std::vector<const models::Layer*> layers;
  for (const auto& l : g.layers) layers.push_back(&l);
  const strategies::ParallelismSpec par;
  const auto whole = strategies::backward_work(layers, g, par, -1);
  const auto b = strategies::backward_part_work(layers, g, par, -1, false);
  const auto w = strategies::backward_part_work(layers, g, par, -1, true);
  EXPECT_EQ(b.kernels.size() + w.kernels.size(), whole.kernels.size());
  auto flops = [](const taskgraph::Work& x) {
    double f = 0;
    for (const auto& k : x.kernels) f += k.flops;
    return f;
  };
  EXPECT_NEAR(flops(b) + flops(w), flops(whole), 1e-6 * flops(whole));
  // Each linear layer's backward is two GEMMs of its forward's FLOPs: dX in B, dW in W.
  double wgrad = 0;
  for (const auto& k : whole.kernels)
    if (k.name.find(".wgrad") != std::string::npos) wgrad += k.flops;
  EXPECT_GT(wgrad, 0.0);
  for (const auto& k : w.kernels) EXPECT_TRUE(strategies::weight_gradient_kernel(k) || k.name == "grad_accumulate") << k.name;
  for (const auto& k : b.kernels) EXPECT_FALSE(strategies::weight_gradient_kernel(k)) << k.name;
}

TEST(ZeroBubbleBubble, H1BubbleIsPMinusOneTimesFPlusBMinusW) {
  // Qi et al. 2024, Sec. 3.1: ZB-H1's bubble is (p-1)(T_F + T_B - T_W), 1F1B's (p-1)(T_F + T_B + T_W).
  for (auto [p, m] : {std::pair{2, 4}, {4, 8}, {8, 16}, {4, 4}})
    for (auto [tf, tb, tw] : {std::tuple{1.0, 1.0, 1.0}, {1.0, 1.2, 0.8}}) {
      const double ideal = m * (tf + tb + tw);
      const double zb = uniform_step(Schedule::ZeroBubbleH1, p, m, tf, tb, tw);
      EXPECT_NEAR(zb - ideal, (p - 1) * (tf + tb - tw), 1e-9) << "p=" << p << " m=" << m << " tb=" << tb;
      EXPECT_NEAR((zb - ideal) / ideal, strategies::zero_bubble_h1_fraction(p, m, tf, tb, tw), 1e-9);
      const double f1b = uniform_step(Schedule::OneFOneB, p, m, tf, tb, tw);
      EXPECT_NEAR(f1b - ideal, (p - 1) * (tf + tb + tw), 1e-9);
    }
  EXPECT_NEAR(strategies::bubble_fraction(Schedule::ZeroBubbleH1, 8, 16, 1), 7.0 / 48.0, 1e-12);
}

TEST(ZeroBubbleMemory, H1HoldsAtMostPMicroBatchesAs1F1BsFirstStage) {
  const int p = 4, m = 8;
  for (int s = 0; s < p; ++s) {
    const auto q = strategies::stage_schedule(Schedule::ZeroBubbleH1, p, s, m, 1);
    int live = 0, peak = 0, b = 0, w = 0;
    for (const auto& op : q) {
      if (op.forward) ++live;
      if (op.part == strategies::PipeOp::Part::Input) ++b;
      if (op.part == strategies::PipeOp::Part::Weight) ++w, --live;
      peak = std::max(peak, live);
    }
    EXPECT_EQ(b, m);
    EXPECT_EQ(w, m);
    EXPECT_EQ(peak, std::min(p, m)) << "stage " << s;
  }
  // Stage 0 holds what 1F1B's stage 0 holds: p micro-batches.
  const auto g = graph(2 * p);
  EXPECT_NEAR(plan(g, Schedule::ZeroBubbleH1, p, m).stage_memory[0].activations,
              plan(g, Schedule::OneFOneB, p, m).stage_memory[0].activations, 1e-6);
}

TEST(ZeroBubbleResult, RunsFromAScenarioOnBothCountsOfWork) {
  const auto r = test::simulate_over_base(R"({"extends": "base.json",
    "parallelism": {"data": 2, "pipeline": 4, "micro_batch_size": 4, "pipeline_schedule": "zero-bubble-h1"},
    "simulation": {"backend": "analytical"}})");
  const auto f = test::simulate_over_base(R"({"extends": "base.json",
    "parallelism": {"data": 2, "pipeline": 4, "micro_batch_size": 4, "pipeline_schedule": "1f1b"},
    "simulation": {"backend": "analytical"}})");
  EXPECT_EQ(results::to_json(r, false)["parallelism"]["pipeline_schedule"], "zero-bubble-h1");
  EXPECT_LT(r.breakdown.pipeline_bubble, f.breakdown.pipeline_bubble);
  EXPECT_LT(r.step_time_s, f.step_time_s);
  EXPECT_NEAR(r.model_flops, f.model_flops, 1e-6 * f.model_flops);
}

TEST(ZeroBubbleMemory, BKeepsWhatWReads32SbhPerLayer) {
  // Qi et al. 2024, Table 1: after B a transformer layer keeps M_W = 32 sbh bytes (16-bit), the
  // inputs and output gradients of its four weight GEMMs, of M_B = 34 sbh + 5 a s^2 b.
  const auto g = graph(2);
  const models::Layer* block = nullptr;
  for (const auto& l : g.layers)
    if (l.kind == models::LayerKind::Block) block = &l;
  ASSERT_NE(block, nullptr);
  const double s = 1024, b = 1, h = 768;
  EXPECT_NEAR(strategies::weight_pass_bytes({block}, 2), 32 * s * b * h, 1e-6);
  // A middle stage: 1F1B holds p - s micro-batches whole; ZB-H1 more micro-batches, but those
  // past B only M_W of each.
  const int p = 4, m = 8;
  const auto g8 = graph(2 * p);
  const auto zb = plan(g8, Schedule::ZeroBubbleH1, p, m), f1b = plan(g8, Schedule::OneFOneB, p, m);
  std::vector<const models::Layer*> stage1;
  for (const auto& l : g8.layers)
    if (l.kind == models::LayerKind::Block && stage1.size() < 4) stage1.push_back(&l);  // blocks 0..1 on stage 0
  stage1.erase(stage1.begin(), stage1.begin() + 2);  // stage 1's two blocks
  const double a = f1b.stage_memory[1].activations / 3;  // p - s = 3 whole micro-batches
  const double mw = strategies::weight_pass_bytes(stage1, 2);
  // Stage 1 (W deferred by one): warm-up 2 F, then F B W...; at most 3 whole and 1 past B.
  EXPECT_NEAR(zb.stage_memory[1].activations, 3 * a + mw, 1e-6 * a);
}
