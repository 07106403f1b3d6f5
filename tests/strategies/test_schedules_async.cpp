// Issue 17 item 4: PipeDream (Narayanan et al. SOSP 2019) and PipeDream-2BW (Narayanan et al.
// ICML 2021), 1F1B without a flush, run as events over several steps.
#include <gtest/gtest.h>

#include <algorithm>

#include "models/model_graph.hpp"
#include "scenario_helpers.hpp"
#include "sim/network/platform.hpp"
#include "sim/replay/replay.hpp"
#include "sim/results/steps.hpp"
#include "strategies/plan.hpp"

using namespace dtsim;
using strategies::Schedule;

namespace {

models::TransformerSpec blocks(int layers) {
  models::TransformerSpec s;
  s.name = "small";
  s.num_layers = layers;
  s.hidden_size = 768;
  s.num_heads = 12;
  s.num_kv_heads = 12;
  s.ffn_hidden_size = 3072;
  s.seq_len = 1024;
  s.vocab_size = 50257;
  return s;
}

strategies::Plan plan(Schedule sched, int p, int m, int dp = 1) {
  const auto g = models::build_transformer(blocks(2 * p), {1, 2, models::Attention::Standard, 1, false});
  strategies::ParallelismSpec par;
  par.pipeline = p;
  par.data = dp;
  par.schedule = sched;
  strategies::TrainingSpec t;
  t.global_batch = static_cast<std::int64_t>(m) * dp;
  return strategies::plan_training(g, par, t, {});
}

// Each step's time when `steps` steps of a pipeline whose forwards take `fwd` seconds and
// backwards `bwd` (everything else free) replay back to back on the analytical backend.
std::vector<double> uniform_step_times(Schedule sched, int p, int m, int steps, double fwd, double bwd) {
  const auto pl = plan(sched, p, m);
  std::vector<double> seconds;
  for (const auto& w : pl.graph.works)
    seconds.push_back(w.name.rfind("fwd", 0) == 0 ? fwd : w.name.rfind("bwd", 0) == 0 ? bwd : 0.0);
  std::vector<int> step_of;
  const auto g = results::repeat_steps(pl.graph, steps, step_of);
  network::ClusterSpec c;
  c.nodes = p;
  c.intra_bandwidth = c.nic_bandwidth = 1e30;
  c.intra_latency = c.inter_latency = 0;
  network::Platform pf(c);
  const auto t = replay::replay_analytical({g, seconds, pf});
  std::vector<double> end(static_cast<std::size_t>(steps), 0.0), out;
  for (std::size_t i = 0; i < g.tasks.size(); ++i)
    end[static_cast<std::size_t>(step_of[i])] = std::max(end[static_cast<std::size_t>(step_of[i])], t.end[i]);
  for (int k = 0; k < steps; ++k) out.push_back(end[static_cast<std::size_t>(k)] - (k ? end[static_cast<std::size_t>(k - 1)] : 0.0));
  return out;
}

}  // namespace

TEST(PipeDreamSchedule, AWindowRunsEachForwardOnceAndFinishesThePreviousStepsBackwards) {
  const int p = 4, m = 8;
  for (int s = 0; s < p; ++s) {
    const auto q = strategies::stage_schedule(Schedule::PipeDream, p, s, m, 1);
    ASSERT_EQ(q.size(), 2u * m);
    int forwards = 0, previous = 0, live = 0, peak = 0;
    for (const auto& op : q) {
      forwards += op.forward;
      previous += op.previous_step;
      if (op.previous_step) {
        EXPECT_GE(op.micro_batch, m - (p - s - 1));
      }
    }
    EXPECT_EQ(forwards, m);
    EXPECT_EQ(previous, p - s - 1) << "stage " << s;  // the warm-up forwards of 1F1B, a step earlier
    live = previous;
    for (const auto& op : q) peak = std::max(peak, live += op.forward ? 1 : -1);
    EXPECT_EQ(peak, p - s) << "stage " << s;  // micro-batches in flight: PipeDream's NOAM per stage
  }
}

TEST(PipeDreamBubble, SteadyStateStepsHaveNoBubble) {
  // F = 1, B = 2: after the first step (which carries the fill, (p-1) F), every step is m (F + B)
  // with every stage busy throughout; 1F1B pays (p-1)(F + B) every step.
  for (auto sched : {Schedule::PipeDream, Schedule::PipeDream2BW})
    for (auto [p, m] : {std::pair{4, 8}, {8, 16}}) {
      const auto t = uniform_step_times(sched, p, m, 4, 1.0, 2.0);
      EXPECT_NEAR(t[0], m * 3.0 + (p - 1) * 1.0, 1e-9) << strategies::to_string(sched) << " p=" << p;
      for (int k = 1; k < 4; ++k)
        EXPECT_NEAR(t[static_cast<std::size_t>(k)], m * 3.0, 1e-9) << strategies::to_string(sched) << " p=" << p << " step " << k;
      EXPECT_EQ(strategies::bubble_fraction(sched, p, m, 1), 0.0);
      const auto flushed = uniform_step_times(Schedule::OneFOneB, p, m, 4, 1.0, 2.0);
      EXPECT_NEAR(flushed[3], m * 3.0 + (p - 1) * 3.0, 1e-9);
    }
}

TEST(PipeDreamMemory, StashesOneWeightVersionPerMicroBatchInFlight2BWTwo) {
  const int p = 4, m = 8;
  const auto base = plan(Schedule::OneFOneB, p, m), dream = plan(Schedule::PipeDream, p, m),
             two = plan(Schedule::PipeDream2BW, p, m);
  for (int s = 0; s < p; ++s) {
    const auto i = static_cast<std::size_t>(s);
    // Weight stashing: p - s versions of the stage's weights (Narayanan et al. 2019, Sec. 3.3).
    EXPECT_NEAR(dream.stage_memory[i].params, (p - s) * base.stage_memory[i].params, 1e-6) << "stage " << s;
    EXPECT_NEAR(two.stage_memory[i].params, 2 * base.stage_memory[i].params, 1e-6) << "stage " << s;
    // Activations: p - s micro-batches in flight, as 1F1B's.
    EXPECT_NEAR(dream.stage_memory[i].activations, base.stage_memory[i].activations, 1e-6) << "stage " << s;
    EXPECT_NEAR(two.stage_memory[i].activations, base.stage_memory[i].activations, 1e-6) << "stage " << s;
    EXPECT_EQ(dream.stage_memory[i].gradients, base.stage_memory[i].gradients);
  }
  EXPECT_EQ(dream.stage_weight_versions, (std::vector<int>{4, 3, 2, 1}));
  EXPECT_EQ(dream.stage_staleness, (std::vector<int>{3, 2, 1, 0}));
  EXPECT_EQ(two.stage_weight_versions, (std::vector<int>{2, 2, 2, 2}));
  EXPECT_EQ(two.stage_staleness, (std::vector<int>{1, 1, 1, 1}));
  EXPECT_EQ(base.stage_weight_versions, (std::vector<int>{1, 1, 1, 1}));
}

TEST(PipeDreamUpdates, PipeDreamStepsAfterEveryBackward2BWOncePerStep) {
  const int p = 4, m = 8;
  auto count = [](const strategies::Plan& pl, auto pred) {
    return std::count_if(pl.graph.tasks.begin(), pl.graph.tasks.end(), pred);
  };
  auto optimizer = [](const taskgraph::Task& t) { return !t.is_collective && t.category == taskgraph::Category::Optimizer; };
  auto all_reduce = [](const taskgraph::Task& t) {
    return t.is_collective && t.collective().op == taskgraph::CollectiveOp::AllReduce && t.label().find("embedding") == std::string::npos;
  };
  EXPECT_EQ(count(plan(Schedule::PipeDream, p, m), optimizer), p * m);
  EXPECT_EQ(count(plan(Schedule::PipeDream2BW, p, m), optimizer), p);
  // Data-parallel stages all-reduce each micro-batch's gradients before its update.
  EXPECT_EQ(count(plan(Schedule::PipeDream, p, m, 2), all_reduce), p * m);
}

TEST(PipeDreamResult, ReportsWeightVersionsAndStalenessOverSeveralSteps) {
  const auto r = test::simulate_over_base(R"({"extends": "base.json",
    "parallelism": {"data": 2, "pipeline": 4, "micro_batch_size": 4, "pipeline_schedule": "pipedream"},
    "simulation": {"backend": "analytical"}})");
  const auto j = results::to_json(r, false);
  EXPECT_EQ(j["parallelism"]["weight_versions"], nlohmann::ordered_json({4, 3, 2, 1}));
  EXPECT_EQ(j["parallelism"]["weight_staleness_updates"], nlohmann::ordered_json({3, 2, 1, 0}));
  EXPECT_EQ(j["parallelism"]["expected_bubble_fraction"].get<double>(), 0.0);
  ASSERT_TRUE(r.steps.has_value());
  EXPECT_EQ(r.steps->step_times.size(), 4u);
  // The first step carries the fill; the steady steps are shorter.
  EXPECT_LT(r.steps->step_times[3], r.steps->step_times[0]);
  const auto flushed = test::simulate_over_base(R"({"extends": "base.json",
    "parallelism": {"data": 2, "pipeline": 4, "micro_batch_size": 4, "pipeline_schedule": "1f1b"},
    "simulation": {"backend": "analytical"}})");
  EXPECT_FALSE(results::to_json(flushed, false)["parallelism"].contains("weight_versions"));
}

TEST(PipeDreamResult, NeedsAtLeastOneMicroBatchPerStage) {
  EXPECT_EQ(test::input_error_over_base(R"({"extends": "base.json",
    "parallelism": {"data": 2, "pipeline": 4, "micro_batch_size": 4, "pipeline_schedule": "pipedream-2bw"},
    "training": {"global_batch_size": 16}})"),
            "/training/global_batch_size: pipedream-2bw needs at least pipeline (4) micro-batches per step, not 2");
  EXPECT_EQ(test::input_error_over_base(R"({"extends": "base.json",
    "parallelism": {"data": 2, "pipeline": 4, "micro_batch_size": 4, "pipeline_schedule": "pipedream", "zero_stage": 1}})"),
            "/parallelism/zero_stage: pipedream updates every micro-batch with its stage's whole gradients: ZeRO is not "
            "modelled with it");
}
