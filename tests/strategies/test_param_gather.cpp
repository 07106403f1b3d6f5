// Megatron-Core's --overlap-param-gather (parallelism.overlap_param_gather): the distributed
// optimizer's parameter all-gather (ZeRO-1 and 2) leaves the end of the step and runs during the
// first micro-batch's forward, layer by layer, each layer's forward waiting only for its own
// (megatron/core/distributed/param_and_grad_buffer.py, finish_param_sync).
#include <gtest/gtest.h>

#include <string>

#include "graph_queries.hpp"
#include "helpers.hpp"
#include "reports/reports.hpp"
#include "scenario_helpers.hpp"
#include "sim/config/scenario.hpp"
#include "sim/results/result.hpp"

using namespace dtsim;
using taskgraph::CollectiveOp;

namespace {

// GPT-2 on 8 A100s (data 8, micro-batch 4, global batch 64: 2 micro-batches), ZeRO-1, analytical,
// with `extra` in its parallelism.
results::Result run(const std::string& extra) {
  return test::simulate_over_base(R"({"extends": "base.json", "simulation": {"backend": "analytical"},
    "parallelism": {"data": 8, "micro_batch_size": 4, "zero_stage": 1)" + extra + "}}");
}

constexpr const char* kOverlap = R"(, "overlap_param_gather": true)";

}  // namespace

// One gather per layer with parameters, 2 bytes a parameter over the 8 data-parallel GPUs, in the
// first micro-batch's forward; that forward of the layer starts once its gather has ended; no
// gather is left after the optimizer.
TEST(ParamGather, GathersEachLayerBeforeItsFirstForward) {
  const auto r = run(kOverlap);
  const auto& g = r.plan.graph;
  EXPECT_EQ(test::count_collectives(g, CollectiveOp::AllGather, "zero gather params"), 0);
  double gathered = 0;
  int gathers = 0;
  for (std::size_t i = 0; i < g.tasks.size(); ++i) {
    const auto& t = g.tasks[i];
    if (!t.is_collective || t.label().rfind("zero gather ", 0) != 0) continue;
    ++gathers;
    gathered += t.collective().bytes;
    EXPECT_NE(t.label().find(" mb0"), std::string::npos) << t.label();
    int waiting = 0;  // the layer's forward
    for (std::size_t j = 0; j < g.tasks.size(); ++j)
      for (int d : g.tasks[j].deps)
        if (d == static_cast<int>(i) && !g.tasks[j].is_collective) {
          ++waiting;
          EXPECT_GE(r.timeline.start[j], r.timeline.end[i] - 1e-12) << g.tasks[j].label();
        }
    EXPECT_EQ(waiting, 1) << t.label();
  }
  const auto graph = r.scenario_spec.model.build(models::BuildOptions{4, 2, models::Attention::Standard});
  int with_params = 0;
  for (const auto& l : graph.layers) with_params += l.params() > 0 ? 1 : 0;
  EXPECT_EQ(gathers, with_params);
  EXPECT_DOUBLE_EQ(gathered, 2 * graph.params());
  test::expect_parts_sum_to_step(r);
}

// The step loses the gather after the optimizer and gains only what the forward cannot hide: the
// first forward starts late by max over layers of (gathers through the layer - forwards before it).
TEST(ParamGather, HidesTheGatherBehindTheFirstForward) {
  const auto plain = run("");
  const auto over = run(kOverlap);
  const auto* whole = test::find_task(plain.plan.graph, "zero gather params");
  ASSERT_NE(whole, nullptr);
  const auto w = static_cast<std::size_t>(whole - plain.plan.graph.tasks.data());
  const double after_step = plain.timeline.end[w] - plain.timeline.start[w];
  // Each gather and the forward that waits for it, in order: the delay a chain of them adds.
  const auto& g = over.plan.graph;
  double gathers = 0, forwards = 0, delay = 0;
  for (std::size_t i = 0; i < g.tasks.size(); ++i) {
    if (!g.tasks[i].is_collective || g.tasks[i].label().rfind("zero gather ", 0) != 0) continue;
    gathers += over.timeline.end[i] - over.timeline.start[i];
    delay = std::max(delay, gathers - forwards);
    for (std::size_t j = 0; j < g.tasks.size(); ++j)
      for (int d : g.tasks[j].deps)
        if (d == static_cast<int>(i) && !g.tasks[j].is_collective) forwards += over.timeline.end[j] - over.timeline.start[j];
  }
  EXPECT_GT(after_step, 0.0);
  EXPECT_LT(delay, after_step);
  EXPECT_NEAR(over.step_time_s, plain.step_time_s - after_step + delay, 1e-9 * plain.step_time_s);
  // What each GPU holds does not change: ZeRO-1 keeps every parameter either way.
  EXPECT_DOUBLE_EQ(over.memory.params, plain.memory.params);
  EXPECT_DOUBLE_EQ(over.device_peak(), plain.device_peak());
}

// The result and the summary state that it ran.
TEST(ParamGather, TheSummaryStatesIt) {
  const auto r = run(kOverlap);
  EXPECT_TRUE(r.scenario_spec.parallelism.overlap_param_gather);
  EXPECT_NE(reports::summary(r).find("zero stage 1 (parameter gather overlapped with the forward)"), std::string::npos)
      << reports::summary(r);
}

// Megatron-Core overlaps the distributed optimizer's gather only: not ZeRO-0 or ZeRO-3, not another
// framework's, and only with the gradient reduce overlapped (megatron/training/arguments.py).
TEST(ParamGather, RefusesWhatMegatronDoesNotRun) {
  auto error = [](const std::string& parallelism) {
    return test::input_error_over_base(R"({"extends": "base.json", "parallelism": {"data": 8, "micro_batch_size": 4, )" +
                                       parallelism + R"(, "overlap_param_gather": true}})");
  };
  EXPECT_NE(error(R"("zero_stage": 0)").find("zero_stage 1 or 2"), std::string::npos) << error(R"("zero_stage": 0)");
  EXPECT_NE(error(R"("zero_stage": 3)").find("/parallelism/overlap_param_gather"), std::string::npos);
  const auto ds = error(R"("zero_stage": 2, "framework": "deepspeed")");
  EXPECT_NE(ds.find("megatron-lm"), std::string::npos) << ds;
  const auto no_grad = error(R"("zero_stage": 1, "overlap_grad_reduce": false)");
  EXPECT_NE(no_grad.find("overlap_grad_reduce"), std::string::npos) << no_grad;
  EXPECT_EQ(error(R"("zero_stage": 2)"), "");
}
