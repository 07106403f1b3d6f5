// Every registered pipeline schedule (strategies/schedules/registry.cpp): its name, its passes,
// its bubble and its peak in closed form, each against a walk of the passes it orders.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "strategies/schedule.hpp"

using namespace dtsim;
using strategies::PipeOp;
using strategies::Schedule;
using Part = PipeOp::Part;

namespace {

struct Shape {
  int stages, micro_batches, chunks;
};

// Shapes every schedule takes: micro-batches at least the stages (no flush) and a multiple of
// them (interleaving); chunks only where the schedule runs several per stage.
std::vector<Shape> shapes(Schedule s) {
  std::vector<Shape> out;
  for (auto [p, m] : {std::pair{1, 1}, {1, 3}, {2, 2}, {2, 6}, {4, 4}, {4, 8}, {3, 9}, {8, 16}})
    for (int v : {1, 2, 3})
      if (v == 1 || s->chunked) out.push_back({p, m, v});
  return out;
}

std::string label(Schedule s, const Shape& x) {
  return std::string(strategies::to_string(s)) + " p" + std::to_string(x.stages) + " m" + std::to_string(x.micro_batches) + " v" +
         std::to_string(x.chunks);
}

// A pass of the whole pipeline: window (step), micro-batch, model chunk, and 0 forward, 1
// backward (whole or input gradient), 2 weight gradient.
using Pass = std::tuple<int, int, int, int>;
int kind(const PipeOp& op) { return op.forward ? 0 : op.part == Part::Weight ? 2 : 1; }

// Runs `windows` windows of every stage's passes in the schedule's order, each pass as soon as
// its stage is free and what it needs has ended: the forward through the chunk before, the
// backward through the chunk after (the last chunk's, its own forward), the weight gradient its
// input gradient. Forwards take 1, whole backwards 2, split ones 1 and 1. Each window's end;
// empty when the stages wait on each other for ever.
std::vector<double> walk(Schedule s, const Shape& x, int windows) {
  const int p = x.stages, J = x.stages * x.chunks;
  std::vector<std::vector<std::pair<Pass, double>>> queue(static_cast<std::size_t>(p));
  for (int w = 0; w < windows; ++w)
    for (int st = 0; st < p; ++st)
      for (const auto& op : strategies::stage_schedule(s, p, st, x.micro_batches, x.chunks))
        queue[static_cast<std::size_t>(st)].push_back(
            {{w - (op.previous_step ? 1 : 0), op.micro_batch, op.chunk * p + st, kind(op)},
             op.forward || op.part != Part::Whole ? 1.0 : 2.0});
  std::map<Pass, double> end;
  auto ended = [&](const Pass& q) -> std::optional<double> {
    if (std::get<0>(q) < 0) return 0.0;  // a window before the first: done
    if (auto it = end.find(q); it != end.end()) return it->second;
    return std::nullopt;
  };
  std::vector<std::size_t> next(static_cast<std::size_t>(p), 0);
  std::vector<double> free(static_cast<std::size_t>(p), 0.0), window_end(static_cast<std::size_t>(windows), 0.0);
  for (bool moved = true; moved;) {
    moved = false;
    for (std::size_t st = 0; st < queue.size(); ++st)
      while (next[st] < queue[st].size()) {
        const auto& [q, seconds] = queue[st][next[st]];
        const auto [w, mb, j, k] = q;
        const Pass need = k == 0 ? Pass{w, mb, j - 1, 0} : k == 2 ? Pass{w, mb, j, 1} : j + 1 < J ? Pass{w, mb, j + 1, 1} : Pass{w, mb, j, 0};
        const auto ready = k == 0 && j == 0 ? std::optional<double>(0.0) : ended(need);
        if (!ready) break;
        free[st] = std::max(free[st], *ready) + seconds;
        end[q] = free[st];
        const std::size_t window = next[st] * static_cast<std::size_t>(windows) / queue[st].size();
        window_end[window] = std::max(window_end[window], free[st]);
        ++next[st];
        moved = true;
      }
  }
  for (std::size_t st = 0; st < queue.size(); ++st)
    if (next[st] < queue[st].size()) return {};
  return window_end;
}

}  // namespace

TEST(Schedules, EveryNameRoundTripsAndTheConstantsNameTheirSchedules) {
  const auto names = strategies::schedule_names();
  ASSERT_EQ(names.size(), strategies::all_schedules().size());
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
  for (Schedule s : strategies::all_schedules()) {
    const auto back = strategies::schedule_from_string(strategies::to_string(s));
    ASSERT_TRUE(back) << strategies::to_string(s);
    EXPECT_EQ(back->index(), s.index());
  }
  EXPECT_FALSE(strategies::schedule_from_string("2f2b"));
  const std::vector<std::pair<Schedule, std::string>> named{
      {Schedule::Naive, "naive"},         {Schedule::GPipe, "gpipe"},         {Schedule::OneFOneB, "1f1b"},
      {Schedule::Interleaved, "interleaved-1f1b"}, {Schedule::PipeDream, "pipedream"}, {Schedule::PipeDream2BW, "pipedream-2bw"},
      {Schedule::ZeroBubbleH1, "zero-bubble-h1"}};
  for (const auto& [s, name] : named) EXPECT_EQ(strategies::to_string(s), name);
}

// Each stage runs every micro-batch once forward and once backward through each of its chunks,
// the backward after the forward (a window's backwards of the previous step aside), a weight
// gradient after its input gradient; and the stages never wait on each other for ever.
TEST(Schedules, EveryStageRunsEachPassOnceAfterWhatItNeeds) {
  for (Schedule s : strategies::all_schedules())
    for (const Shape& x : shapes(s)) {
      SCOPED_TRACE(label(s, x));
      for (int st = 0; st < x.stages; ++st) {
        std::map<std::tuple<int, int, int>, int> seen;  // (micro-batch, chunk, kind) -> count
        std::set<std::pair<int, int>> forwarded, input_done;
        for (const auto& op : strategies::stage_schedule(s, x.stages, st, x.micro_batches, x.chunks)) {
          ASSERT_TRUE(op.micro_batch >= 0 && op.micro_batch < x.micro_batches && op.chunk >= 0 && op.chunk < x.chunks);
          ++seen[{op.micro_batch, op.chunk, kind(op)}];
          const std::pair<int, int> at{op.micro_batch, op.chunk};
          if (op.forward) {
            forwarded.insert(at);
          } else if (op.part == Part::Weight) {
            EXPECT_TRUE(input_done.count(at)) << "W before B of mb " << op.micro_batch;
          } else {
            if (!op.previous_step) {
              EXPECT_TRUE(forwarded.count(at)) << "backward before forward of mb " << op.micro_batch;
            }
            if (op.part == Part::Input) input_done.insert(at);
          }
        }
        auto times = [&](int mb, int c, int k) {
          const auto it = seen.find({mb, c, k});
          return it == seen.end() ? 0 : it->second;
        };
        const bool split = s->splits_backward;
        for (int mb = 0; mb < x.micro_batches; ++mb)
          for (int c = 0; c < x.chunks; ++c) {
            EXPECT_EQ(times(mb, c, 0), 1) << "forward mb " << mb << " c " << c;
            EXPECT_EQ(times(mb, c, 1), 1) << "backward mb " << mb << " c " << c;
            EXPECT_EQ(times(mb, c, 2), split ? 1 : 0) << "weight gradient mb " << mb << " c " << c;
          }
        EXPECT_EQ(seen.size(), static_cast<std::size_t>(x.micro_batches * x.chunks * (split ? 3 : 2)));
      }
      EXPECT_FALSE(walk(s, x, 1).empty()) << "the stages wait on each other for ever";
    }
}

// Uniform passes (a forward and a whole backward 3 between them, however split): idle time over
// compute time as the walk finds it is the schedule's closed form. Without a flush a window's
// time once the pipeline is full.
TEST(Schedules, TheBubbleInClosedFormIsTheWalksIdleTime) {
  for (Schedule s : strategies::all_schedules())
    for (const Shape& x : shapes(s)) {
      SCOPED_TRACE(label(s, x));
      const double ideal = 3.0 * x.micro_batches * x.chunks;
      const int windows = s->no_flush ? 4 : 1;
      const auto ends = walk(s, x, windows);
      ASSERT_EQ(ends.size(), static_cast<std::size_t>(windows));
      const double step = windows == 1 ? ends[0] : ends[3] - ends[2];
      EXPECT_NEAR((step - ideal) / ideal, strategies::bubble_fraction(s, x.stages, x.micro_batches, x.chunks), 1e-12);
    }
}

// Where a schedule gives its peak of live activations in closed form, it is the walk's: each
// forward adds its chunk's activations, each (weight-gradient) backward frees them.
TEST(Schedules, ThePeakInClosedFormIsTheWalksPeak) {
  int given = 0;
  for (Schedule s : strategies::all_schedules())
    for (const Shape& x : shapes(s))
      for (int st = 0; st < x.stages; ++st) {
        SCOPED_TRACE(label(s, x) + " stage " + std::to_string(st));
        std::vector<double> kept;
        for (int c = 0; c < x.chunks; ++c) kept.push_back(1000.0 * (c + 1) + 7 * st);
        const auto closed = strategies::peak_in_flight(s, x.stages, st, x.micro_batches, kept);
        if (!closed) continue;
        ++given;
        double live = 0, peak = 0;
        for (const auto& op : strategies::stage_schedule(s, x.stages, st, x.micro_batches, x.chunks)) {
          const double a = kept[static_cast<std::size_t>(op.chunk)];
          if (op.forward) live += a;
          else if (op.part != Part::Input) live -= a;
          peak = std::max(peak, live);
        }
        EXPECT_EQ(*closed, peak);
      }
  EXPECT_GT(given, 0);
}
