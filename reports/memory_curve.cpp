#include "reports/memory_curve.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "reports/palette.hpp"
#include "reports/svg.hpp"
#include "sim/core/units.hpp"

namespace dtsim::reports::memory_curve {

std::vector<std::vector<Point>> curves(const results::Result& r) {
  const auto& floor = r.plan.stage_memory_floor;
  const auto& end = r.timeline.end;
  std::vector<std::vector<Point>> out;
  if (!r.timed || floor.empty()) return out;
  const double reserve = r.scenario_spec.reserved_bytes;
  for (double f : floor) out.push_back({{0.0, f + reserve}});
  // The first step's tasks keep their plan indices in a replay of several steps (copies follow).
  std::vector<strategies::MemoryMark> marks;
  for (const auto& m : r.plan.memory_marks)
    if (m.task >= 0 && static_cast<std::size_t>(m.task) < end.size()) marks.push_back(m);
  std::stable_sort(marks.begin(), marks.end(), [&](const auto& a, const auto& b) {
    return end[static_cast<std::size_t>(a.task)] < end[static_cast<std::size_t>(b.task)];
  });
  for (const auto& m : marks) {
    auto& c = out[static_cast<std::size_t>(m.stage)];
    const double t = end[static_cast<std::size_t>(m.task)];
    c.push_back({t, c.back().bytes});
    c.push_back({t, c.back().bytes + m.bytes});
  }
  return out;
}

namespace {

constexpr const char* kStageColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"};

double peak_of(const std::vector<Point>& c) {
  double p = 0;
  for (const auto& x : c) p = std::max(p, x.bytes);
  return p;
}

}  // namespace

std::string draw(const results::Result& r, double width) {
  const auto all = curves(r);
  if (all.empty()) return "";
  // At most eight stages drawn, evenly by index, the first and the last included.
  std::vector<std::size_t> shown;
  const std::size_t n = all.size(), k = std::min<std::size_t>(n, 8);
  for (std::size_t i = 0; i < k; ++i) shown.push_back(k == 1 ? 0 : i * (n - 1) / (k - 1));
  double top = r.capacity_bytes, span = r.step_time_s;
  for (const auto& c : all) top = std::max(top, peak_of(c)), span = std::max(span, c.back().t);
  const double left = 60, height = 250, plot = width - left - 10;
  auto x = [&](double t) { return left + plot * (span > 0 ? t / span : 0); };
  auto y = [&](double b) { return 10 + 180 * (1 - (top > 0 ? b / top : 0)); };  // 10..190, then the time axis and the key
  std::string s = fmt::format("<svg class='memory-curve' width='{:.0f}' height='{:.0f}' role='img'>", width, height);
  s += fmt::format("<text x='4' y='{:.1f}' font-size='11'>{:.0f} GiB</text><text x='4' y='{:.1f}' font-size='11'>0</text>", y(top) + 4,
                   top / units::kGiB, y(0));
  s += fmt::format("<text x='{:.1f}' y='204' font-size='11'>0 s</text><text x='{:.1f}' y='204' font-size='11' text-anchor='end'>{:.3g} s into "
                   "the step</text>", left, left + plot, span);
  s += fmt::format("<line x1='{0:.1f}' x2='{1:.1f}' y1='{2:.1f}' y2='{2:.1f}' stroke='#000' stroke-dasharray='4 3'><title>capacity {3:.1f} GiB</title></line>",
                   left, left + plot, y(r.capacity_bytes), r.capacity_bytes / units::kGiB);
  for (std::size_t j = 0; j < shown.size(); ++j) {
    const auto& c = all[shown[j]];
    std::string points;
    for (const auto& p : c) points += fmt::format("{:.1f},{:.1f} ", x(p.t), y(p.bytes));
    const std::string name = n > 1 ? fmt::format("stage {}", shown[j]) : std::string("every GPU");
    s += fmt::format("<polyline fill='none' stroke='{}' stroke-width='1.5' points='{}'><title>{}: peak {:.1f} GiB</title></polyline>",
                     kStageColours[j % std::size(kStageColours)], points, svg::escape(name), peak_of(c) / units::kGiB);
    s += fmt::format("<text x='{:.1f}' y='{:.0f}' font-size='11' fill='{}'>{}: peak {:.1f} GiB</text>", left + 130.0 * static_cast<double>(j % 6),
                     220 + 14.0 * static_cast<double>(j / 6), kStageColours[j % std::size(kStageColours)], svg::escape(name),
                     peak_of(c) / units::kGiB);
  }
  return s + "</svg>\n";
}

}  // namespace dtsim::reports::memory_curve
