#include "reports/timeline.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <map>
#include <set>
#include <string_view>
#include <thread>

#include "reports/svg.hpp"

namespace dtsim::reports::timeline {

namespace {

using svg::escape;

const char* colour(const taskgraph::Task& t) {
  if (t.is_collective) return t.collective().op == taskgraph::CollectiveOp::SendRecv ? "#9467bd" : "#d62728";
  switch (t.category) {
    case taskgraph::Category::Optimizer: return "#2ca02c";
    case taskgraph::Category::Communication: return "#ff7f0e";
    case taskgraph::Category::Input: return "#8c564b";
    case taskgraph::Category::Copy: return "#17becf";
    default: return t.label().rfind("fwd", 0) == 0 ? "#1f77b4" : "#6baed6";
  }
}

// What a colour of the timeline stands for, as its legend says.
const char* kind_of(std::string_view fill) {
  for (const auto& [c, name] : {std::pair{"#1f77b4", "forward"}, std::pair{"#6baed6", "backward"}, std::pair{"#2ca02c", "optimizer"},
                                std::pair{"#ff7f0e", "communication kernels"}, std::pair{"#8c564b", "data loader"},
                                std::pair{"#d62728", "collective"}, std::pair{"#9467bd", "stage-to-stage transfer"}})
    if (fill == c) return name;
  return "tasks";
}

// Idle time's colours, as the breakdown bar draws the same parts; drawn paler in the timeline.
constexpr std::pair<replay::IdleCause, const char*> kIdleColours[] = {
    {replay::IdleCause::PipelineBubble, "#bbbbbb"},       {replay::IdleCause::StageImbalance, "#bcbd22"},
    {replay::IdleCause::StragglerWait, "#ff7f0e"},        {replay::IdleCause::ExposedCommunication, "#d62728"},
    {replay::IdleCause::InputStall, "#8c564b"}};

// Waiting on peer stages slowed by a stack's communication interference: the breakdown bar's
// colour for that part. In the legend of a run whose stack shows it.
const char* idle_colour(replay::IdleCause c) {
  if (c == replay::IdleCause::CommInterference) return "#e377c2";
  for (const auto& [cause, col] : kIdleColours)
    if (cause == c) return col;
  return "#bbbbbb";
}

// "pipeline bubble" -> "idle-pipeline-bubble": the class of its spans.
std::string idle_class(replay::IdleCause c) {
  std::string s = std::string("idle-") + replay::to_string(c);
  std::replace(s.begin(), s.end(), ' ', '-');
  return s;
}

// A rectangle of the timeline. Big runs have far more tasks than pixels: neighbours narrower
// than three pixels, of one colour and touching, are drawn as one, which keeps the page small.
struct Mark {
  double x0 = 0, x1 = 0;
  const char* fill = "";
  std::string cls, first, last;  // first and last: the labels of what it covers
  double seconds = 0;
  int count = 1;
  bool narrow_tail = false;  // its last piece is narrower than three pixels
};

// A lane with more marks than room for them (a thousand-GPU pipeline's step in 1,100 pixels),
// drawn pixel column by pixel column: each column in the colour that fills most of it, runs of one
// colour as one rectangle. Returns false, drawing nothing, when the lane has room.
bool rasterise(const std::vector<Mark>& v, double left, double width, std::vector<Mark>& out) {
  if (static_cast<double>(v.size()) <= width / 3) return false;
  const auto cols = static_cast<std::size_t>(std::ceil(width)) + 1;
  std::vector<const Mark*> fills;  // one representative per colour
  std::vector<std::vector<double>> cover, seconds;  // per colour, per column
  for (const auto& m : v) {
    std::size_t f = 0;
    while (f < fills.size() && std::string_view(fills[f]->fill) != m.fill) ++f;
    if (f == fills.size()) {
      fills.push_back(&m);
      cover.emplace_back(cols, 0.0);
      seconds.emplace_back(cols, 0.0);
    }
    const double a = std::clamp(m.x0 - left, 0.0, width), b = std::clamp(m.x1 - left, 0.0, width);
    if (b <= a) {  // narrower than rounding: its column
      const auto c = std::min(cols - 1, static_cast<std::size_t>(a));
      cover[f][c] += 1e-9;
      seconds[f][c] += m.seconds;
      continue;
    }
    for (auto c = static_cast<std::size_t>(a); c < cols && static_cast<double>(c) < b; ++c) {
      const double part = std::min(b, c + 1.0) - std::max(a, static_cast<double>(c));
      cover[f][c] += part;
      seconds[f][c] += m.seconds * part / (b - a);
    }
  }
  for (std::size_t c = 0; c < cols; ++c) {
    std::size_t best = fills.size();
    for (std::size_t f = 0; f < fills.size(); ++f)
      if (cover[f][c] > 0 && (best == fills.size() || cover[f][c] > cover[best][c])) best = f;
    if (best == fills.size()) continue;
    if (!out.empty() && std::string_view(out.back().fill) == fills[best]->fill && out.back().x1 >= left + static_cast<double>(c)) {
      out.back().x1 = left + static_cast<double>(c) + 1;
      out.back().seconds += seconds[best][c];
      continue;
    }
    Mark m = *fills[best];
    m.x0 = left + static_cast<double>(c);
    m.x1 = m.x0 + 1;
    m.first = std::string("mostly ") + (m.cls.empty() ? kind_of(m.fill) : m.first.c_str());
    m.seconds = seconds[best][c];
    m.count = 1;
    out.push_back(std::move(m));
  }
  return true;
}

std::vector<Mark> merged(std::vector<Mark> v) {
  std::stable_sort(v.begin(), v.end(), [](const Mark& a, const Mark& b) { return a.x0 < b.x0; });
  std::vector<Mark> out;
  for (auto& m : v) {
    const bool narrow = m.x1 - m.x0 < 3;
    if (!out.empty()) {
      Mark& p = out.back();
      if (narrow && p.narrow_tail && std::string_view(p.fill) == m.fill && p.cls == m.cls && m.x0 <= p.x1 + 0.25) {
        p.x1 = std::max(p.x1, m.x1);
        p.last = m.first;
        p.seconds += m.seconds;
        ++p.count;
        continue;
      }
    }
    m.narrow_tail = narrow;
    out.push_back(std::move(m));
  }
  return out;
}

std::string swatch(const char* colour, const std::string& text, double opacity = 1) {
  return fmt::format("<span style='display:inline-block;width:10px;height:10px;background:{};opacity:{}'></span> {} &nbsp; ", colour,
                     opacity, text);
}

// The simulated GPUs drawn (at most max_gpus, evenly spaced by rank), and the note saying so.
std::vector<int> drawn_gpus(const results::Result& r, int max_gpus, std::string& note) {
  std::set<int> all;
  for (const auto& task : r.replayed().tasks)
    if (!task.is_collective) all.insert(task.rank);
  const std::vector<int> ranks(all.begin(), all.end());
  std::vector<int> gpus;
  const auto n = static_cast<int>(ranks.size());
  if (n <= max_gpus) {
    gpus = ranks;
  } else {
    for (int i = 0; i < max_gpus; ++i)
      gpus.push_back(ranks[static_cast<std::size_t>(static_cast<long long>(i) * (n - 1) / (max_gpus - 1))]);
  }
  if (n < r.gpus)
    note += fmt::format("The replay simulates {} of the {} GPUs in the cluster (a representative set of the ranks; the others run the "
                        "same tasks as one of these and are not drawn). ",
                        n, r.gpus);
  if (n > max_gpus)
    note += fmt::format("Sampled: {} of the {} simulated GPUs are drawn, evenly spaced by rank (first and last included).",
                        gpus.size(), n);
  else
    note += n == 1 ? std::string("The one simulated GPU is drawn.") : fmt::format("All {} simulated GPUs are drawn.", n);
  return gpus;
}

// Where each GPU sat idle, and why (sim/replay/waits.hpp), up to the end of the timeline: one
// analysis per GPU, each reading the same graph and timeline, so they run side by side.
std::vector<std::vector<replay::IdleSpan>> idle_spans(const results::Result& r, const std::vector<int>& gpus) {
  const auto& g = r.replayed();
  const auto& t = r.timeline;
  std::vector<std::vector<replay::IdleSpan>> idle(gpus.size());
  std::atomic<std::size_t> next{0};
  auto analyse = [&] {
    for (std::size_t i; (i = next++) < gpus.size();)
      replay::step_breakdown(g, t, r.work_seconds, r.work_comm_seconds, {.rank = gpus[i], .horizon = t.makespan, .idle = &idle[i], .comm_core_share = r.comm_core_share, .sms = r.comm_share_is_sms, .work_interference_seconds = &r.work_interference_seconds,
                                       .slowed_by_interference = r.comm_share_is_sms && !r.scenario_spec.stragglers.enabled});
  };
  std::vector<std::thread> helpers;
  const std::size_t threads = std::min<std::size_t>({std::max(1u, std::thread::hardware_concurrency()), gpus.size(), 16});
  for (std::size_t k = 1; k < threads; ++k) helpers.emplace_back(analyse);
  analyse();
  for (auto& h : helpers) h.join();
  return idle;
}

// Per row, four lanes: idle gaps and compute on top, the loader, the collectives.
enum { kIdle, kCompute, kLoader, kCollective, kLanes };
using Lanes = std::array<std::vector<Mark>, kLanes>;

template <class X>
std::vector<Lanes> lane_marks(const results::Result& r, const std::vector<int>& gpus, const X& x) {
  const auto& g = r.replayed();
  const auto& t = r.timeline;
  std::map<int, int> lane;
  for (std::size_t i = 0; i < gpus.size(); ++i) lane[gpus[i]] = static_cast<int>(i);
  const auto idle = idle_spans(r, gpus);
  std::vector<Lanes> marks(gpus.size());
  for (std::size_t i = 0; i < gpus.size(); ++i)
    for (const auto& s : idle[i])
      if (s.end > s.start)
        marks[i][kIdle].push_back({x(s.start), x(s.end), idle_colour(s.cause), "idle " + idle_class(s.cause),
                                   std::string("idle: ") + replay::to_string(s.cause), "", s.end - s.start});
  for (std::size_t k = 0; k < g.tasks.size(); ++k) {
    const auto& task = g.tasks[k];
    const Mark m{x(t.start[k]), x(t.end[k]), colour(task), "", task.label(), task.label(), t.end[k] - t.start[k]};
    if (!task.is_collective) {
      // Its data loader runs beside the GPU's stream: a lane of its own.
      if (auto it = lane.find(task.rank); it != lane.end())
        marks[static_cast<std::size_t>(it->second)][task.category == taskgraph::Category::Input ? kLoader : kCompute].push_back(m);
      continue;
    }
    for (int group : task.collective().groups)  // an asynchronous push or pull: its `only` member's alone
      for (int gpu : g.groups[static_cast<std::size_t>(group)])
        if (auto it = lane.find(gpu); it != lane.end() && (task.collective().only < 0 || task.collective().only == gpu))
          marks[static_cast<std::size_t>(it->second)][kCollective].push_back(m);
  }
  return marks;
}

}  // namespace

Drawing draw(const results::Result& r, int max_gpus) {
  const auto& t = r.timeline;
  Drawing d;
  const std::vector<int> gpus = drawn_gpus(r, max_gpus, d.note);
  const double width = 1100, left = 70, top = 22, row = 32, span = std::max(t.makespan, 1e-12);
  const double height = top + row * static_cast<double>(gpus.size()) + 24;
  auto x = [&](double s) { return left + s / span * width; };
  std::string& svg = d.svg;
  svg = fmt::format("<svg xmlns='http://www.w3.org/2000/svg' width='{:.0f}' height='{:.0f}' font-family='sans-serif' font-size='11'>\n",
                    left + width + 40, height);
  // Axis: ticks centred on their time, grid lines under the rows, its name below.
  for (int tick = 0; tick <= 10; ++tick) {
    const double at = x(span * tick / 10);
    svg += fmt::format("<line x1='{:.1f}' y1='{}' x2='{:.1f}' y2='{:.0f}' stroke='#eee'/><text x='{:.1f}' y='12' text-anchor='middle' "
                       "fill='#555'>{:.3g} s</text>\n",
                       at, top - 4, at, height - 20, at, span * tick / 10);
  }
  svg += fmt::format("<text x='{:.1f}' y='{:.0f}' text-anchor='middle' fill='#555'>time since the step began (s)</text>\n",
                     left + width / 2, height - 6);

  auto marks = lane_marks(r, gpus, x);
  constexpr double kY[kLanes] = {0, 0, 15, 21}, kHeight[kLanes] = {13, 13, 4, 7};
  bool dense = false;
  auto shown = [&](std::vector<Mark> v) {
    std::vector<Mark> out;
    if (rasterise(v, left, width, out)) {
      dense = true;
      return out;
    }
    return merged(std::move(v));
  };
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    svg += fmt::format("<text class='gpu' x='4' y='{}'>GPU {}</text>\n", top + row * static_cast<double>(i) + 11, gpus[i]);
    for (int l = 0; l < kLanes; ++l)
      for (const auto& m : shown(std::move(marks[i][static_cast<std::size_t>(l)]))) {
        const std::string what = m.count == 1 ? m.first
                                 : m.cls.empty() ? fmt::format("{} tasks, {} to {}", m.count, m.first, m.last)
                                                 : fmt::format("{}, {} gaps", m.first, m.count);
        svg += fmt::format("<rect{} x='{:.2f}' y='{:.1f}' width='{:.2f}' height='{}' fill='{}'{}><title>{} ({:.3f} ms)</title></rect>\n",
                           m.cls.empty() ? "" : " class='" + m.cls + "'", m.x0, top + row * static_cast<double>(i) + kY[l],
                           std::max(0.5, m.x1 - m.x0), kHeight[l], m.fill, l == kIdle ? " fill-opacity='0.45'" : "", escape(what),
                           1e3 * m.seconds);
      }
  }
  svg += "</svg>\n";
  if (dense)
    d.note += " Where a row holds more tasks than it has pixels, each pixel column shows what filled most of it (hover: "
              "\"mostly ...\"); the Chrome trace (--trace) has every task.";
  return d;
}

std::string legend(bool interference) {
  std::string h = swatch("#1f77b4", "forward") + swatch("#6baed6", "backward") + swatch("#2ca02c", "optimizer") +
                  swatch("#8c564b", "data loader") + swatch("#d62728", "collective") + swatch("#9467bd", "stage-to-stage transfer") +
                  "<br>idle: ";
  for (const auto& [cause, col] : kIdleColours) h += swatch(col, replay::to_string(cause), 0.45);
  if (interference) h += swatch(idle_colour(replay::IdleCause::CommInterference), replay::to_string(replay::IdleCause::CommInterference), 0.45);
  return h;
}

}  // namespace dtsim::reports::timeline
