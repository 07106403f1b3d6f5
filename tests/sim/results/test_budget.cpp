// The cost estimate that guards the machine (sim/results/budget.hpp) against what the plan and
// the network model really build, over every scenario in scenarios/.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <unordered_map>

#include "helpers.hpp"
#include "sim/config/scenario.hpp"
#include "sim/network/algorithm_registry.hpp"
#include "sim/network/collectives.hpp"
#include "sim/replay/dispatch.hpp"
#include "sim/replay/replay.hpp"
#include "sim/results/budget.hpp"
#include "sim/results/result.hpp"

using namespace dtsim;

namespace {

std::vector<std::string> all_scenarios() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(test::source_dir() + "/scenarios"))
    if (e.path().extension() == ".json" && e.path().parent_path().filename() != "base" && e.path().filename() != "base.json")
      out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

// Flows lowering builds for one step: for SimGrid every collective task's, for the analytical
// replay each distinct collective's once.
struct StepFlows {
  double every = 0, distinct = 0;
};
StepFlows step_flows(const config::Scenario& s, const taskgraph::TaskGraph& g) {
  network::Platform platform(s.cluster);
  std::unordered_map<const taskgraph::Collective*, double> seen;  // the graph keeps each distinct one once
  StepFlows out;
  for (const auto& t : g.tasks) {
    if (!t.is_collective) continue;
    auto [it, fresh] = seen.try_emplace(&t.collective(), 0.0);
    if (fresh) {
      it->second = static_cast<double>(network::lower(platform, t.collective(), replay::groups_of(g, t.collective())).flow_count());
      out.distinct += it->second;
    }
    out.every += it->second;
  }
  return out;
}

}  // namespace

// Every shipped scenario is allowed, and the estimate bounds what planning really builds: never
// fewer tasks or flows than the plan has (else a limit could be passed unnoticed), and not so
// many more that fair scenarios get refused.
TEST(Budget, EstimateBoundsTasksAndFlowsOfEveryScenario) {
  const auto files = all_scenarios();
  ASSERT_GT(files.size(), 40u);
  for (const auto& f : files) {
    SCOPED_TRACE(f);
    const auto s = config::load_scenario(f);
    EXPECT_NO_THROW(results::check_budget(s));
    const auto e = results::estimate(s, s.backend);
    const auto r = results::memory_only(s);
    const double steps = s.steps_simulated;
    // `auto` (the default all-reduce) is bounded by its largest candidate, the tree, which has four
    // flows for each of a ring's: where it picks the ring the bound is that much above.
    const bool chooses = s.parallelism.algorithm == taskgraph::Algorithm::Auto;
    const double loose = chooses ? 4 : 3, tight = chooses ? 4 : 2;
    const double tasks = static_cast<double>(r.plan.graph.tasks.size()) * steps;
    const auto built = step_flows(s, r.plan.graph);
    EXPECT_NO_THROW(results::check_plan_budget(s, r.plan.graph));
    // Before planning: SimGrid replays every collective of every step.
    const auto sg = results::estimate(s, config::Backend::SimGrid);
    EXPECT_GE(sg.tasks, tasks);
    EXPECT_LE(sg.tasks, 2 * tasks + 200);
    EXPECT_GE(sg.flows, built.every * steps);
    EXPECT_LE(sg.flows, loose * built.every * steps + 1000);
    // Once planned, from the graph's collectives without lowering them.
    const auto planned_sg = results::plan_estimate(s, r.plan.graph, config::Backend::SimGrid);
    const auto planned_an = results::plan_estimate(s, r.plan.graph, config::Backend::Analytical);
    EXPECT_GE(planned_sg.flows, built.every * steps);
    EXPECT_LE(planned_sg.flows, tight * built.every * steps + 1000);
    EXPECT_GE(planned_an.flows, built.distinct);
    EXPECT_LE(planned_an.flows, tight * built.distinct + 1000);
    const double flows = s.backend == config::Backend::SimGrid ? built.every * steps : built.distinct;
    std::printf("%-50s tasks %9.0f / %9.0f  flows %11.0f / %11.0f  est %6.2f s %6.0f MB\n",
                std::filesystem::path(f).filename().c_str(), e.tasks, tasks, e.flows, flows, e.seconds, e.bytes / 1e6);
  }
}

// The arithmetic count of each algorithm's flows is never below what lowering builds.
TEST(Budget, FlowBoundIsAtLeastWhatLoweringBuilds) {
  using taskgraph::Algorithm;
  using taskgraph::CollectiveOp;
  for (int gpn : {1, 8}) {
    network::ClusterSpec c = test::flat_cluster(8);
    c.gpus_per_node = gpn;
    c.nics_per_node = gpn;
    c.nodes = 96 / gpn;
    c.ps_servers = 0;
    network::Platform pf(c);
    for (int p : {2, 3, 8, 24, 96}) {
      std::vector<int> ranks;
      for (int i = 0; i < p; ++i) ranks.push_back(i);
      for (auto op : {CollectiveOp::AllReduce, CollectiveOp::ReduceScatter, CollectiveOp::AllGather, CollectiveOp::Broadcast,
                      CollectiveOp::Reduce, CollectiveOp::AllToAll})
        for (std::size_t i = 0; i < network::algorithm_units().size(); ++i) {  // every registered algorithm
          const auto a = static_cast<Algorithm>(i);
          network::LoweredCollective lc;
          try {
            lc = network::lower(pf, op, a, 1e8, ranks);
          } catch (const std::invalid_argument&) {
            continue;  // not implemented for this operation
          }
          std::size_t widest = 0;
          for (const auto& ph : lc.phases) widest = std::max(widest, ph.flows.size());
          const auto b = network::flow_bound(c, op, a, p, 1, std::min(p, gpn));
          SCOPED_TRACE(std::string(taskgraph::to_string(op)) + " " + network::algorithm_name(a) + " p=" + std::to_string(p) +
                       " gpn=" + std::to_string(gpn));
          EXPECT_GE(b.flows, static_cast<double>(lc.flow_count()));
          EXPECT_GE(b.widest, static_cast<double>(widest));
        }
    }
  }
}

// A sweep's candidates share one slice's facts, its bucket counts among them (counted once per
// layout of the slice): every scenario's strategy, and its variants, estimated with facts another
// strategy filled first cost what they cost with facts of their own.
TEST(Budget, SharedSliceFactsEstimateAsFreshOnes) {
  int checked = 0;
  for (const auto& f : all_scenarios()) {
    config::Scenario s;
    try {
      s = config::load_scenario(f);
    } catch (const std::exception&) {
      continue;  // scenarios that are refused on purpose
    }
    const auto shared = results::slice_facts(s);
    for (int step : {2, 1}) {  // the other pipeline depth first, so the scenario's own reads shared counts
      auto v = s;
      if (step == 2 && v.parallelism.data % 2 == 0 && v.parallelism.pipeline == 1) v.parallelism.data /= 2, v.parallelism.pipeline = 2;
      const auto a = results::estimate(v, config::Backend::Analytical, true, shared);
      const auto b = results::estimate(v, config::Backend::Analytical, true, results::slice_facts(v));
      EXPECT_EQ(a.tasks, b.tasks) << f;
      EXPECT_EQ(a.seconds, b.seconds) << f;
      EXPECT_EQ(a.bytes, b.bytes) << f;
    }
    ++checked;
  }
  EXPECT_GT(checked, 100);
}
