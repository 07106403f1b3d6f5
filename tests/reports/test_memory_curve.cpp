// Issue 31 item 3: memory over the step per pipeline stage, the picture that explains why 1F1B
// holds fewer micro-batches' activations than GPipe.
#include <gtest/gtest.h>

#include <algorithm>

#include "reports/memory_curve.hpp"
#include "reports/reports.hpp"
#include "run_dtsim.hpp"
#include "sim/config/scenario.hpp"
#include "sim/results/result.hpp"

namespace dtsim {
namespace {

// On the analytical backend: SimGrid runs once per process, and the curve is the plan's either way.
results::Result run(const std::string& name) {
  auto s = config::load_scenario(test::source_dir() + "/scenarios/pipeline/" + name);
  s.backend = config::Backend::Analytical;
  return results::simulate(s);
}

double peak(const std::vector<reports::memory_curve::Point>& c) {
  double p = 0;
  for (const auto& x : c) p = std::max(p, x.bytes);
  return p;
}

// What a stage holds beyond its floor at its worst, in micro-batches' activations: GPipe's 8
// stages each hold all 16 micro-batches; 1F1B's stage s holds 8 - s (Narayanan et al. 2021).
TEST(MemoryCurve, HoldsTheMicroBatchesInFlightOfEachSchedule) {
  const auto gpipe = run("schedules-gpipe.json"), one_f_one_b = run("schedules-1f1b.json");
  const auto a = reports::memory_curve::curves(gpipe), b = reports::memory_curve::curves(one_f_one_b);
  ASSERT_EQ(a.size(), 8u);
  ASSERT_EQ(b.size(), 8u);
  for (std::size_t s = 0; s < 8; ++s) {
    const double per_micro_batch = (peak(a[s]) - a[s].front().bytes) / 16;
    EXPECT_GT(per_micro_batch, 0);
    EXPECT_NEAR(peak(b[s]) - b[s].front().bytes, (8.0 - static_cast<double>(s)) * per_micro_batch, 1e-6 * per_micro_batch) << s;
    // Every micro-batch's activations freed by the step's end; each point later than the last.
    EXPECT_NEAR(a[s].back().bytes, a[s].front().bytes, 1.0);
    EXPECT_TRUE(std::is_sorted(b[s].begin(), b[s].end(), [](const auto& x, const auto& y) { return x.t < y.t; }));
  }
}

// The curve's peak is the stage's memory peak the report and result.json give (no full
// recomputation here, so no rebuilt block is left out), the reserve included.
TEST(MemoryCurve, PeaksAtEachStagesMemoryPeak) {
  for (const char* name : {"schedules-gpipe.json", "schedules-1f1b.json", "schedules-zero-bubble-h1.json", "schedules-pipedream.json"}) {
    const auto r = run(name);
    const auto c = reports::memory_curve::curves(r);
    ASSERT_EQ(c.size(), r.plan.stage_memory.size()) << name;
    for (std::size_t s = 0; s < c.size(); ++s)
      EXPECT_NEAR(peak(c[s]), r.plan.stage_memory[s].peak() + r.scenario_spec.reserved_bytes, 1.0) << name << " stage " << s;
  }
}

TEST(MemoryCurve, ReportDrawsOneLinePerStageWithItsPeak) {
  const auto r = run("schedules-1f1b.json");
  const std::string svg = reports::memory_curve::draw(r);
  std::size_t lines = 0;
  for (auto at = svg.find("<polyline"); at != std::string::npos; at = svg.find("<polyline", at + 1)) ++lines;
  EXPECT_EQ(lines, 8u);
  EXPECT_NE(svg.find("stage 0: peak"), std::string::npos);
  EXPECT_NE(reports::html_report(r).find("Memory over the step"), std::string::npos);
}

}  // namespace
}  // namespace dtsim
