// The planner's memory walk in closed form (strategies::peak_in_flight): the most activations a
// stage holds under GPipe, 1F1B and interleaved 1F1B equal the walk over the schedule bit for bit,
// and the layout the sweep prices (plan_layout, no schedule walked) holds what the full plan does.
#include <gtest/gtest.h>

#include <random>

#include "helpers.hpp"
#include "sim/config/build_options.hpp"
#include "sim/config/scenario.hpp"
#include "strategies/plan.hpp"
#include "strategies/schedule.hpp"

using namespace dtsim;
using strategies::Schedule;

namespace {

// The walk the planner runs without the closed form: each forward keeps its chunk's activations
// until the matching backward frees them.
double walked_peak(Schedule s, int p, int stage, int m, const std::vector<double>& kept) {
  double live = 0, peak = 0;
  for (const auto& op : strategies::stage_schedule(s, p, stage, m, static_cast<int>(kept.size()))) {
    live += (op.forward ? 1 : -1) * kept[static_cast<std::size_t>(op.chunk)];
    peak = std::max(peak, live);
  }
  return peak;
}

}  // namespace

TEST(SchedulePeak, EqualsTheWalkOnEveryScheduleItCovers) {
  std::mt19937_64 rng(28);
  std::uniform_int_distribution<std::int64_t> bytes(0, std::int64_t{1} << 40);
  int checked = 0;
  for (Schedule s : {Schedule::GPipe, Schedule::OneFOneB, Schedule::Interleaved})
    for (int v = 1; v <= (s == Schedule::Interleaved ? 4 : 1); ++v)
      for (int p = 1; p <= 9; ++p)
        for (int m = 0; m <= 4 * p + 3; ++m) {
          if (s == Schedule::Interleaved && v > 1 && m % p != 0) continue;  // the schedule refuses these
          for (int stage = 0; stage < p; ++stage) {
            std::vector<double> kept;
            for (int c = 0; c < v; ++c) kept.push_back(static_cast<double>(bytes(rng)));
            const auto closed = strategies::peak_in_flight(s, p, stage, m, kept);
            ASSERT_TRUE(closed) << strategies::to_string(s) << " p" << p << " m" << m << " v" << v;
            ASSERT_EQ(*closed, walked_peak(s, p, stage, m, kept))
                << strategies::to_string(s) << " p" << p << " stage " << stage << " m" << m << " v" << v;
            ++checked;
          }
        }
  EXPECT_GT(checked, 1000);
}

// Where sums could round (not whole bytes, or past 2^53) the walk's order matters: no closed form.
// Nor for the schedules without one here, nor interleaved micro-batches its schedule refuses.
TEST(SchedulePeak, LeavesToTheWalkWhatItCannotGiveExactly) {
  EXPECT_FALSE(strategies::peak_in_flight(Schedule::OneFOneB, 4, 0, 8, {0.1}));
  EXPECT_FALSE(strategies::peak_in_flight(Schedule::GPipe, 4, 0, 1 << 20, {std::ldexp(1.0, 40)}));
  EXPECT_FALSE(strategies::peak_in_flight(Schedule::ZeroBubbleH1, 4, 0, 8, {1.0}));
  EXPECT_FALSE(strategies::peak_in_flight(Schedule::PipeDream, 4, 0, 8, {1.0}));
  EXPECT_FALSE(strategies::peak_in_flight(Schedule::Interleaved, 4, 0, 6, {1.0, 2.0}));
  // 1F1B's stage s holds p - s micro-batches at most (Narayanan et al. 2021), GPipe all of them.
  EXPECT_EQ(*strategies::peak_in_flight(Schedule::OneFOneB, 8, 2, 32, {3.0}), 18.0);
  EXPECT_EQ(*strategies::peak_in_flight(Schedule::GPipe, 8, 2, 32, {3.0}), 96.0);
}

// The layout the sweep prices (no schedule walked where a closed form exists) holds, on every
// stage, what the full plan's walk finds: GPT-2 small on 8 GPUs, pipeline 4 x data 2.
TEST(SchedulePeak, LayoutHoldsWhatTheFullPlanHolds) {
  test::TempDir dir;
  dir.file("base.json", test::kValidScenario);
  const auto s = config::load_scenario(dir.file("s.json", R"({"extends": "base.json",
      "parallelism": {"data": 2, "pipeline": 4, "micro_batch_size": 2}, "training": {"global_batch_size": 32}})"));
  const auto g = s.model.build(config::build_options(s));
  int stages = 0;
  for (Schedule sched : {Schedule::GPipe, Schedule::OneFOneB, Schedule::Interleaved})
    for (auto rc : {strategies::Recompute::None, strategies::Recompute::Selective, strategies::Recompute::Full}) {
      auto p = s.parallelism;
      p.schedule = sched;
      p.virtual_stages = sched == Schedule::Interleaved ? 3 : 1;
      p.recompute = rc;
      const auto laid = strategies::plan_layout(g, p, s.training, s.host).plan;
      const auto full = strategies::plan_training(g, p, s.training, s.host);
      ASSERT_EQ(laid.stage_memory.size(), full.stage_memory.size());
      for (std::size_t i = 0; i < full.stage_memory.size(); ++i, ++stages) {
        EXPECT_EQ(laid.stage_memory[i].activations, full.stage_memory[i].activations) << strategies::to_string(sched) << " stage " << i;
        EXPECT_EQ(laid.stage_memory_floor[i], full.stage_memory_floor[i]);
      }
      EXPECT_EQ(laid.host_bytes(), full.host_bytes());
    }
  EXPECT_EQ(stages, 36);
}
