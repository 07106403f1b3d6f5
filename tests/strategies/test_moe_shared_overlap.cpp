// Megatron-Core's --moe-shared-expert-overlap (parallelism.moe_shared_expert_overlap): the shared
// experts run on a stream of their own, their input projection and activation beside the dispatch
// all-to-all and their output projection beside the combine (backward: the output projection's
// gradient beside the combine's, the rest beside the dispatch's); transformer/moe/shared_experts.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "helpers.hpp"
#include "moe_scenario.hpp"
#include "reports/reports.hpp"
#include "scenario_helpers.hpp"
#include "sim/results/result.hpp"

using namespace dtsim;

namespace {

// 16 experts with two shared ones over two DGX H100 nodes, expert parallelism 16: every
// all-to-all crosses the nodes.
results::Result run(const std::string& extra) {
  test::TempDir dir;
  return results::simulate(
      test::moe_scenario(dir, 2, R"("data": 16, "expert": 16, "micro_batch_size": 1)" + extra, R"(, "shared_experts": 2)"));
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

// Each MoE layer's pass gains the shared experts' two pieces, which start as soon as the piece
// before the all-to-all has run, while it is in flight.
TEST(MoeSharedOverlap, SharedExpertsRunWhileTheAllToAllsAreInFlight) {
  const auto r = run(R"(, "moe_shared_expert_overlap": true)");
  const auto& g = r.plan.graph;
  int first = 0, second = 0, overlapped = 0;
  for (std::size_t i = 0; i < g.tasks.size(); ++i) {
    const auto& t = g.tasks[i];
    if (t.is_collective) continue;
    const bool one = ends_with(t.label(), " shared experts"), two = ends_with(t.label(), " shared experts, second part");
    if (!one && !two) continue;
    (one ? first : second) += 1;
    // Some all-to-all of the same layer runs while it does.
    const std::string layer = t.label().substr(4, t.label().find(' ', 4) - 4);
    for (std::size_t j = 0; j < g.tasks.size(); ++j)
      if (g.tasks[j].is_collective && g.tasks[j].label().find(" " + layer + " ") != std::string::npos &&
          r.timeline.start[j] < r.timeline.end[i] && r.timeline.end[j] > r.timeline.start[i]) {
        ++overlapped;
        break;
      }
  }
  // 4 MoE layers, forward and backward, 4 micro-batches.
  EXPECT_EQ(first, 4 * 2 * 4);
  EXPECT_EQ(second, 4 * 2 * 4);
  EXPECT_EQ(overlapped, first + second);
  test::expect_parts_sum_to_step(r);
}

// The step gains what the shared experts hide of the all-to-alls; the work and the memory are
// the same.
TEST(MoeSharedOverlap, TheStepLosesWhatTheSharedExpertsHide) {
  const auto plain = run(""), over = run(R"(, "moe_shared_expert_overlap": true)");
  EXPECT_LT(over.step_time_s, plain.step_time_s);
  EXPECT_LT(over.breakdown.exposed_communication, plain.breakdown.exposed_communication);
  EXPECT_DOUBLE_EQ(over.model_flops, plain.model_flops);
  EXPECT_DOUBLE_EQ(over.device_peak(), plain.device_peak());
  // It cannot hide more than the shared experts take: their whole compute bounds the saving.
  double shared = 0;
  for (std::size_t i = 0; i < over.plan.graph.tasks.size(); ++i) {
    const auto& t = over.plan.graph.tasks[i];
    if (!t.is_collective && t.label().find(" shared experts") != std::string::npos) shared += over.timeline.end[i] - over.timeline.start[i];
  }
  EXPECT_GT(shared, 0.0);
  EXPECT_LE(plain.step_time_s - over.step_time_s, shared * (1 + 1e-9));
  EXPECT_NE(reports::summary(over).find("shared experts beside the all-to-alls"), std::string::npos);
}

TEST(MoeSharedOverlap, RefusedWhereMegatronRefusesIt) {
  test::TempDir dir;
  auto error = [&](const std::string& parallelism) {
    try {
      test::moe_scenario(dir, 2, parallelism, R"(, "shared_experts": 2)");
    } catch (const InputError& e) {
      return e.pointer() + ": " + e.reason();
    }
    return std::string();
  };
  EXPECT_NE(error(R"("data": 16, "moe_shared_expert_overlap": true)").find("expert > 1"), std::string::npos);
  const auto both = error(R"("data": 16, "expert": 16, "moe_shared_expert_overlap": true, "moe_a2a_overlap": "dualpipe")");
  EXPECT_NE(both.find("/parallelism/moe_shared_expert_overlap"), std::string::npos) << both;
}
