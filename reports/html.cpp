#include <fmt/format.h>

#include <algorithm>

#include "reports/html_marks.hpp"
#include "reports/memory_curve.hpp"
#include "reports/palette.hpp"
#include "reports/reports.hpp"
#include "strategies/settings.hpp"
#include "reports/svg.hpp"
#include "reports/timeline.hpp"
#include "sim/core/units.hpp"

namespace dtsim::reports {

using svg::escape;

namespace {

// Inside the timeline's marks, so the explorer's timeline box shows it too.
std::string memory_over_time(const results::Result& r) {
  const std::string curve = memory_curve::draw(r);
  if (curve.empty()) return "";
  return "<h3>Memory over the step</h3><p>What each pipeline stage's GPU holds as the step runs: its parameters, gradients, "
         "optimizer state and the reserve, plus the activations of every micro-batch whose forward has run and whose backward has "
         "not (each pass counted as it ends). The dashed line is the device's capacity.</p>\n" + curve;
}

}  // namespace

std::string html_report(const results::Result& r) {
  const auto& s = r.scenario_spec;
  std::string h = "<!doctype html><html><head><meta charset='utf-8'><title>dtsim: " + escape(r.scenario) +
                  "</title><style>body{font-family:sans-serif;margin:20px;max-width:1200px}td{padding:2px 10px}</style></head><body>\n";
  h += fmt::format("<h1>{}</h1><p>{}</p>\n", escape(r.scenario), escape(s.description));
  h += fmt::format("<table><tr><td>model</td><td>{} ({:.2f} B parameters)</td></tr><tr><td>cluster</td><td>{} x {} ({} nodes x {})</td></tr>",
                   escape(s.model.name), r.params / 1e9, r.gpus, escape(s.device.name), s.cluster.nodes, s.cluster.gpus_per_node);
  h += fmt::format("<tr><td>parallelism</td><td>{}, micro-batch {}, {} micro-batches per step, {}</td></tr>",
                   parallel_dimensions(s.parallelism), s.parallelism.micro_batch, r.plan.micro_batches,
                   strategies::to_string(s.training.precision));
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
    if (r.shows_interference()) parts.emplace_back("communication interference", b.comm_interference);
    h += std::string(r.async ? "<h2>Where the step goes (every worker's time, per step's worth of updates)</h2>\n"
                             : "<h2>Where the step goes</h2>\n") +
         svg::bar(parts, palette::colours(palette::kStep),
             r.step_time_s, "s");
    const timeline::Drawing tl = timeline::draw(r, 64);
    h += "<h2>Timeline</h2><p>Each simulated GPU: compute on top (dark blue forward, light blue backward, green optimizer), its data "
         "loader below it (brown), then its collectives (red; purple for stage-to-stage transfers). Where the GPU sat idle, the gap is "
         "coloured by what it waited for. Hover for names.</p>\n" + std::string(kTimelineBegin) + "<p class='legend'>" + timeline::legend(r.shows_interference()) +
         "</p>\n<p class='sampling'>" + escape(tl.note) + "</p>\n" + tl.svg + memory_over_time(r) + kTimelineEnd + "\n";
  }
  h += fmt::format("<h2>Memory per GPU</h2><p>Capacity {:.1f} GiB.</p>\n", r.capacity_bytes / units::kGiB);
  const auto& stages = r.plan.stage_memory;
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const auto& m = stages[i];
    // The allocator's cache, where the stack names one (docs/memory.md): the GPU holds it too.
    const double cache = i < r.plan.stage_allocator_slack.size() ? r.plan.stage_allocator_slack[i] : 0.0;
    const double whole = m.peak() + s.reserved_bytes + cache;
    h += fmt::format("<p>{}: {:.1f} GiB{}</p>\n", stages.size() > 1 ? fmt::format("stage {}", i) : std::string("every GPU"),
                     whole / units::kGiB, whole > r.capacity_bytes ? " — does not fit" : "");
    std::vector<std::pair<std::string, double>> parts{{"parameters", m.params / units::kGiB}, {"gradients", m.gradients / units::kGiB},
              {"optimizer", m.optimizer / units::kGiB}, {"activations", m.activations / units::kGiB},
              {"other", (m.other + s.reserved_bytes) / units::kGiB}};
    std::vector<const char*> colours = palette::colours(palette::kMemory);
    if (cache > 0) parts.emplace_back("allocator cache", cache / units::kGiB), colours.emplace_back("#dddddd");
    h += svg::bar(parts, colours, std::max(r.capacity_bytes, whole) / units::kGiB, "GiB", 900, r.capacity_bytes / units::kGiB);
  }
  return h + "</body></html>\n";
}

}  // namespace dtsim::reports
