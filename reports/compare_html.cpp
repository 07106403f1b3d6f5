#include <fmt/format.h>

#include <algorithm>

#include "reports/palette.hpp"
#include "reports/reports.hpp"
#include "reports/svg.hpp"
#include "sim/core/units.hpp"

namespace dtsim::reports {

namespace {

using svg::escape;

double number(const nlohmann::json& j, const std::string& pointer) {
  const nlohmann::json::json_pointer p(pointer);
  return j.contains(p) && j.at(p).is_number() ? j.at(p).get<double>() : 0.0;
}

std::string text(const nlohmann::json& j, const std::string& pointer) {
  const nlohmann::json::json_pointer p(pointer);
  if (!j.contains(p)) return "";
  return j.at(p).is_string() ? j.at(p).get<std::string>() : j.at(p).dump();
}

// One result's column: what ran, where its step goes (on the shared scale) and its memory.
std::string column(const nlohmann::json& r, const std::string& name, double longest_step, const std::string& timeline) {
  std::string h = fmt::format("<div class='side'><h2>{}</h2><p class='file'>{}</p>\n", escape(text(r, "/scenario")), escape(name));
  if (!timeline.empty())
    h += fmt::format("<p><a class='timeline' href='{}'>its timeline and memory per stage (report.html)</a></p>\n", escape(timeline));
  h += "<table>";
  for (const char* key : {"/model/name", "/parallelism/gpus", "/parallelism/data", "/parallelism/tensor", "/parallelism/pipeline",
                          "/parallelism/pipeline_schedule", "/parallelism/micro_batches_per_step", "/parallelism/zero_stage",
                          "/parallelism/updates", "/simulation/backend"})
    if (const std::string v = text(r, key); !v.empty()) h += fmt::format("<tr><td>{}</td><td>{}</td></tr>", key + 1, escape(v));
  h += fmt::format("<tr><td>step time</td><td>{:.4g} s</td></tr></table>\n", number(r, "/step_time_s"));
  std::vector<std::pair<std::string, double>> parts;
  // The parts in the order report.html draws them; the checkpoint only where present.
  for (const auto& p : palette::kStep)
    if (r.contains("breakdown_s") && r["breakdown_s"].contains(p.key)) parts.emplace_back(p.label, number(r, std::string("/breakdown_s/") + p.key));
  // Both bars are drawn to the longer step's scale: the shorter step is a shorter bar.
  h += "<h3>Where the step goes</h3>\n" +
       svg::bar(parts, palette::colours(palette::kStep), longest_step, "s", 440);
  const double gib = units::kGiB, capacity = number(r, "/memory/capacity_bytes") / gib, peak = number(r, "/memory/peak_bytes") / gib;
  h += fmt::format("<h3>Memory of the fullest GPU (rank {}): {:.1f} GiB{}</h3>\n", text(r, "/memory/worst_rank"), peak,
                   r.contains("/memory/fits"_json_pointer) && r["memory"]["fits"] == false ? " — does not fit" : "");
  h += svg::bar({{"parameters", number(r, "/memory/params_bytes") / gib},
                 {"gradients", number(r, "/memory/gradients_bytes") / gib},
                 {"optimizer", number(r, "/memory/optimizer_bytes") / gib},
                 {"activations", number(r, "/memory/activations_bytes") / gib},
                 {"other", number(r, "/memory/other_bytes") / gib}},
                palette::colours(palette::kMemory), std::max(capacity, peak), "GiB", 440, capacity);
  return h + "</div>\n";
}

}  // namespace

std::string html_compare(const nlohmann::json& base, const nlohmann::json& cand, const std::string& base_name,
                         const std::string& cand_name, const Tolerances& tol, const std::string& base_timeline,
                         const std::string& cand_timeline) {
  std::string h = "<!doctype html><html><head><meta charset='utf-8'><title>dtsim compare: " + escape(text(base, "/scenario")) + " vs " +
                  escape(text(cand, "/scenario")) +
                  "</title><style>body{font-family:sans-serif;margin:20px}td{padding:2px 10px}.compare{display:flex;gap:24px}"
                  ".side{flex:1;min-width:600px}.file{color:#555}pre{background:#f6f6f6;padding:8px}</style></head><body>\n";
  h += fmt::format("<h1>{} vs {}</h1>\n", escape(text(base, "/scenario")), escape(text(cand, "/scenario")));
  const auto diffs = scenario_differences(base, cand);
  if (!diffs.empty()) {
    h += "<p>What differs between the two runs:</p><ul>";
    for (const auto& d : diffs) h += fmt::format("<li>{}: {} vs {}</li>", escape(d.pointer), escape(d.baseline), escape(d.candidate));
    h += "</ul>\n";
  }
  const Comparison c = compare(base, cand, tol);
  h += "<p>Left is the baseline, right the candidate; change, tolerance and verdict of each metric:</p><pre>";
  for (const auto& l : c.lines) h += escape(l) + "\n";
  h += "</pre>\n<div class='compare'>\n";
  const double longest = std::max({number(base, "/step_time_s"), number(cand, "/step_time_s"), 1e-12});
  h += column(base, base_name, longest, base_timeline) + column(cand, cand_name, longest, cand_timeline);
  return h + "</div></body></html>\n";
}

}  // namespace dtsim::reports
