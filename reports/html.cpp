#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "reports/reports.hpp"
#include "sim/core/units.hpp"

namespace dtsim::reports {

namespace {

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else if (c == '"') o += "&quot;";
    else o += c;
  }
  return o;
}

const char* colour(const taskgraph::Task& t) {
  if (t.is_collective) return t.collective.op == taskgraph::CollectiveOp::SendRecv ? "#9467bd" : "#d62728";
  switch (t.category) {
    case taskgraph::Category::Optimizer: return "#2ca02c";
    case taskgraph::Category::Communication: return "#ff7f0e";
    case taskgraph::Category::Input: return "#8c564b";
    case taskgraph::Category::Copy: return "#17becf";
    default: return t.label.rfind("fwd", 0) == 0 ? "#1f77b4" : "#6baed6";
  }
}

// One lane per simulated GPU (compute above, its collectives below), time to the right.
std::string timeline(const results::Result& r, int max_gpus) {
  const auto& g = r.replayed();
  const auto& t = r.timeline;
  std::vector<int> gpus;
  for (const auto& task : g.tasks)
    if (!task.is_collective && std::find(gpus.begin(), gpus.end(), task.rank) == gpus.end() &&
        static_cast<int>(gpus.size()) < max_gpus)
      gpus.push_back(task.rank);
  std::sort(gpus.begin(), gpus.end());
  std::map<int, int> lane;
  for (std::size_t i = 0; i < gpus.size(); ++i) lane[gpus[i]] = static_cast<int>(i);
  const double width = 1100, left = 70, row = 26, span = std::max(t.makespan, 1e-12);
  const double height = 30 + row * static_cast<double>(gpus.size());
  auto x = [&](double s) { return left + s / span * width; };
  std::string svg = fmt::format("<svg xmlns='http://www.w3.org/2000/svg' width='{}' height='{}' font-family='sans-serif' font-size='11'>\n",
                                left + width + 10, height);
  for (const auto& [gpu, i] : lane)
    svg += fmt::format("<text x='4' y='{}'>GPU {}</text>\n", 22 + row * i + 10, gpu);
  for (std::size_t k = 0; k < g.tasks.size(); ++k) {
    const auto& task = g.tasks[k];
    const double w = std::max(0.5, x(t.end[k]) - x(t.start[k]));
    auto rect = [&](int i, double y0, double h) {
      svg += fmt::format("<rect x='{:.2f}' y='{:.1f}' width='{:.2f}' height='{}' fill='{}'><title>{} ({:.3f} ms)</title></rect>\n",
                         x(t.start[k]), 22 + row * i + y0, w, h, colour(task), escape(task.label),
                         1e3 * (t.end[k] - t.start[k]));
    };
    if (!task.is_collective) {
      if (auto it = lane.find(task.rank); it != lane.end()) rect(it->second, 0, 13);
      continue;
    }
    for (int group : task.collective.groups)
      for (int gpu : g.groups[static_cast<std::size_t>(group)])
        if (auto it = lane.find(gpu); it != lane.end()) rect(it->second, 15, 7);
  }
  for (int tick = 0; tick <= 10; ++tick)
    svg += fmt::format("<text x='{:.1f}' y='12' fill='#555'>{:.3g} s</text>\n", x(span * tick / 10) - 8, span * tick / 10);
  return svg + "</svg>\n";
}

std::string bar(const std::vector<std::pair<std::string, double>>& parts, const std::vector<const char*>& colours, double total,
                const std::string& unit) {
  const double width = 900;
  std::string svg = "<svg xmlns='http://www.w3.org/2000/svg' width='1180' height='46' font-family='sans-serif' font-size='11'>\n";
  double at = 0;
  std::string legend;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const double w = total > 0 ? parts[i].second / total * width : 0;
    svg += fmt::format("<rect x='{:.1f}' y='4' width='{:.1f}' height='20' fill='{}'><title>{}: {:.4g} {}</title></rect>\n", at, w,
                       colours[i % colours.size()], parts[i].first, parts[i].second, unit);
    legend += fmt::format("<tspan fill='{}'>&#9632;</tspan> {} {:.4g} {}  ", colours[i % colours.size()], parts[i].first,
                          parts[i].second, unit);
    at += w;
  }
  return svg + fmt::format("<text x='0' y='40'>{}</text></svg>\n", legend);
}

}  // namespace

std::string html_report(const results::Result& r) {
  const auto& s = r.scenario_spec;
  std::string h = "<!doctype html><html><head><meta charset='utf-8'><title>dtsim: " + escape(r.scenario) +
                  "</title><style>body{font-family:sans-serif;margin:20px;max-width:1200px}td{padding:2px 10px}</style></head><body>\n";
  h += fmt::format("<h1>{}</h1><p>{}</p>\n", escape(r.scenario), escape(s.description));
  h += fmt::format("<table><tr><td>model</td><td>{} ({:.2f} B parameters)</td></tr><tr><td>cluster</td><td>{} x {} ({} nodes x {})</td></tr>",
                   escape(s.model.name), r.params / 1e9, r.gpus, escape(s.device.name), s.cluster.nodes, s.cluster.gpus_per_node);
  h += fmt::format("<tr><td>parallelism</td><td>data {} x tensor {} x pipeline {}, micro-batch {}, {} micro-batches per step</td></tr>",
                   s.parallelism.data, s.parallelism.tensor, s.parallelism.pipeline, s.parallelism.micro_batch, r.plan.micro_batches);
  if (r.timed)
    h += fmt::format("<tr><td>step time</td><td>{:.4f} s, {:.1f} samples/s, MFU {:.1f}%</td></tr>", r.step_time_s, r.samples_per_s,
                     100 * r.mfu);
  h += "</table>\n";
  if (r.timed) {
    const auto& b = r.breakdown;
    // The parts add up to the step time; asynchronous workers' time per step's worth of updates.
    std::vector<std::pair<std::string, double>> parts{
        {"compute", b.compute},           {"exposed communication", b.exposed_communication},
        {"pipeline bubble", b.pipeline_bubble}, {"stage imbalance", b.stage_imbalance},
        {"optimizer", b.optimizer},       {"straggler wait", b.straggler_wait},
        {"input stall", b.input_stall}};
    if (r.roles) parts.emplace_back("checkpoint", b.checkpoint);  // the chief's saves (cluster.roles)
    h += std::string(r.async ? "<h2>Where the step goes (every worker's time, per step's worth of updates)</h2>\n"
                             : "<h2>Where the step goes</h2>\n") +
         bar(parts, {"#1f77b4", "#d62728", "#bbbbbb", "#bcbd22", "#2ca02c", "#ff7f0e", "#8c564b", "#9467bd"},
             r.step_time_s, "s");
    h += "<h2>Timeline</h2><p>Each simulated GPU: compute above (dark blue forward, light blue backward, green optimizer), "
         "its collectives below (red; purple for stage-to-stage transfers). Hover for names.</p>\n" + timeline(r, 32);
  }
  h += fmt::format("<h2>Memory per GPU</h2><p>Capacity {:.1f} GiB.</p>\n", r.capacity_bytes / units::kGiB);
  const auto& stages = r.plan.stage_memory;
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const auto& m = stages[i];
    h += fmt::format("<p>{}: {:.1f} GiB{}</p>\n", stages.size() > 1 ? fmt::format("stage {}", i) : std::string("every GPU"),
                     (m.peak() + s.reserved_bytes) / units::kGiB, m.peak() + s.reserved_bytes > r.capacity_bytes ? " — does not fit" : "");
    h += bar({{"parameters", m.params / units::kGiB}, {"gradients", m.gradients / units::kGiB},
              {"optimizer", m.optimizer / units::kGiB}, {"activations", m.activations / units::kGiB},
              {"other", (m.other + s.reserved_bytes) / units::kGiB}},
             {"#1f77b4", "#6baed6", "#2ca02c", "#ff7f0e", "#bbbbbb"},
             std::max(r.capacity_bytes, m.peak() + s.reserved_bytes) / units::kGiB, "GiB");
  }
  return h + "</body></html>\n";
}

}  // namespace dtsim::reports
