// A framework behaviour added as the house means it to be: one unit with its own state, hooks,
// task count, closed-form answer and settings, registered by name (strategies/unit.hpp). The unit
// below is written here whole, as a new one is written in its own file under strategies/units/
// and listed once in strategies/unit.cpp; nothing else is touched, and this test checks that the
// scenario loader, `dtsim describe`, the planner, the budget, the replay and the result all take
// it from there. It models a host-side synchronisation after each optimizer step (a loss read
// back with .item(), a logging barrier): a fixed time on every stage's GPU after its step.
#include <gtest/gtest.h>

#include <algorithm>

#include "scenario_helpers.hpp"
#include "sim/config/build_options.hpp"
#include "sim/config/describe.hpp"
#include "sim/core/json_reader.hpp"
#include "sim/results/budget.hpp"
#include "strategies/plan.hpp"
#include "strategies/planner.hpp"
#include "strategies/unit.hpp"

using namespace dtsim;

namespace {

class StepSync final : public strategies::Unit {
 public:
  explicit StepSync(const strategies::ParallelismSpec& p) : seconds_(p.unit_settings.at("step_sync").number("seconds")) {}
  const char* name() const override { return "step-sync"; }

  void after_optimizer(strategies::Planner& em, int s, const std::vector<int>& deps) override {
    taskgraph::Work w;
    w.name = "step sync";
    w.fixed_seconds = seconds_;
    em.plan().graph.add_compute(em.gpu(s), em.works().get(std::move(w)), taskgraph::Category::Optimizer, "step sync", deps);
  }
  // One per stage after its optimizer step, where a synchronous step runs one.
  double tasks(const strategies::Count& c) const override {
    const bool stepped = c.k.sync && c.p.schedule != strategies::Schedule::PipeDream;
    return stepped ? static_cast<double>(c.k.pipeline) : 0.0;
  }
  std::string replay_only(const strategies::ParallelismSpec&) const override { return "a host synchronisation after the step"; }

 private:
  double seconds_;
};

void read_step_sync(Reader& r, strategies::UnitOptions& o) {
  o.flags["enabled"] = r.boolean("enabled", false);
  r.document("enabled", "whether the host synchronises after each optimizer step (the test's own unit)");
  o.numbers["seconds"] = r.number("seconds", Range{0.0, 60.0}, 0.001);
  r.document("seconds", "what one synchronisation takes, s");
}

// Registered before main, as every built-in unit is before any scenario is read.
const bool registered = [] {
  strategies::register_unit({"step-sync",
                             [](const strategies::ParallelismSpec& p) { return p.unit_settings.at("step_sync").flag("enabled"); },
                             [](const strategies::ParallelismSpec& p) -> std::unique_ptr<strategies::Unit> { return std::make_unique<StepSync>(p); },
                             "step_sync", read_step_sync});
  return true;
}();

// On the analytical network: the replay, without SimGrid's once-per-process start.
constexpr const char* kPlain = R"({"extends": "base.json", "simulation": {"backend": "analytical"}})";
constexpr const char* kSynced = R"({"extends": "base.json", "simulation": {"backend": "analytical"},
  "parallelism": {"step_sync": {"enabled": true, "seconds": 0.25}}})";

}  // namespace

TEST(UnitRegistry, ANewUnitIsListedAfterTheBuiltInOnes) {
  ASSERT_TRUE(registered);
  const auto names = strategies::unit_names();
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.front(), "input-loader");
  EXPECT_EQ(names.back(), "step-sync");
}

TEST(UnitRegistry, ItsSettingsAreReadDocumentedAndStated) {
  const auto keys = config::declared_keys();
  const auto it = std::find_if(keys.begin(), keys.end(), [](const auto& e) { return config::dotted(e.key) == "parallelism.step_sync.seconds"; });
  ASSERT_NE(it, keys.end());
  EXPECT_EQ(it->doc, "what one synchronisation takes, s");
  EXPECT_EQ(it->key.fallback, "0.001");
  // A misspelt key is refused where it is written, with the unit's own keys as suggestions.
  const std::string error = test::input_error_over_base(R"({"extends": "base.json", "parallelism": {"step_sync": {"secnds": 1}}})");
  EXPECT_NE(error.find("/parallelism/step_sync/secnds"), std::string::npos) << error;
  EXPECT_NE(error.find("seconds"), std::string::npos) << error;
  // The result states the settings the unit ran with, and only when it ran.
  const auto synced = results::to_json(test::simulate_over_base(kSynced), false);
  EXPECT_EQ(synced["parallelism"]["step_sync"]["seconds"], 0.25);
  EXPECT_EQ(synced["parallelism"]["step_sync"]["enabled"], true);
  const auto plain = results::to_json(test::simulate_over_base(kPlain), false);
  EXPECT_FALSE(plain["parallelism"].contains("step_sync"));
}

TEST(UnitRegistry, ThePlannerBudgetAndReplayTakeItFromThere) {
  test::TempDir dir;
  dir.file("base.json", test::kValidScenario);
  const auto s = config::load_scenario(dir.file("s.json", kSynced));
  const auto graph = s.model.build(config::build_options(s));
  const auto lay = strategies::layout_of(graph, s.parallelism, s.training);
  const auto plan = strategies::plan_training(graph, lay, s.parallelism, s.training, s.host);
  const auto units = strategies::make_units(s.parallelism);
  ASSERT_EQ(units.size(), 1u);
  const strategies::Count c{lay, s.parallelism, s.training, {units[0].get()}, strategies::replicas_join(lay, s.parallelism), &graph, nullptr};
  // What it counts is what it emits, and what the budget estimates before anything is built.
  EXPECT_EQ(units[0]->tasks(c), static_cast<double>(plan.unit_tasks.at("step-sync")));
  EXPECT_EQ(results::estimate(s, config::Backend::Analytical, false).tasks, static_cast<double>(plan.graph.tasks.size()));
  // The closed form leaves it to the replay, which adds its time after the last optimizer step.
  const auto synced = results::simulate(s);
  const auto plain = test::simulate_over_base(kPlain);
  EXPECT_NEAR(synced.step_time_s - plain.step_time_s, 0.25, 1e-9);
  test::expect_parts_sum_to_step(synced);
}
