#include "sim/cli/commands.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>

#include "reports/reports.hpp"
#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "sim/core/files.hpp"
#include "sim/core/json_reader.hpp"
#include "sim/core/paths.hpp"

namespace dtsim::cli {

namespace {

// One folder under out/, whatever the name holds ("..", "/", "a/b").
std::string default_out_dir(const std::string& name) { return "out/" + slug(name); }

void print(const results::Result& r, const std::string& format) {
  if (format == "json") std::cout << results::to_json(r).dump(2) << "\n";
  else std::cout << reports::summary(r);
}

// The report.html that `run --html` wrote beside `result`, as a link from the page `page`; empty
// when there is none. A run removes a report it does not rewrite, so one found there is the
// same run's.
std::string report_beside(const std::string& result, const std::string& page) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path report = fs::absolute(result, ec).parent_path() / "report.html";
  if (ec || !fs::is_regular_file(report, ec)) return "";
  const fs::path from = fs::absolute(page, ec).parent_path();
  const fs::path rel = ec ? fs::path() : fs::relative(report, from, ec);
  return ec || rel.empty() ? report.string() : rel.generic_string();
}

}  // namespace

int run(const RunOptions& o) {
  const config::Scenario s = config::load_scenario(o.scenario);
  const std::string dir = o.out_dir.empty() ? default_out_dir(s.name) : o.out_dir;
  std::vector<std::string> names{"result.json", "provenance.json"};
  if (o.trace) names.push_back("trace.json");
  if (o.html) names.push_back("report.html");
  for (const auto& n : names) check_output_path(dir + "/" + n);  // before the simulation, not after
  const results::Result r = results::simulate(s);
  // result.json holds nothing that depends on the machine or on how the path was spelled;
  // those go in provenance.json.
  OutputSet files;
  files.add(dir + "/result.json", results::to_json(r, false).dump(2) + "\n");
  files.add(dir + "/provenance.json", nlohmann::ordered_json{{"dtsim_version", DTSIM_VERSION},
                                                             {"wall_time_s", r.wall_time_s},
                                                             {"scenario_file", s.file}}.dump(2) + "\n");
  // A trace or report left by an earlier run in this folder would describe another run: removed
  // with this set's commit when this run does not rewrite it.
  if (o.trace) files.add(dir + "/trace.json", reports::chrome_trace(r).dump() + "\n");
  else files.remove(dir + "/trace.json");
  if (o.html) files.add(dir + "/report.html", reports::html_report(r));
  else files.remove(dir + "/report.html");
  files.commit();
  print(r, o.format);
  if (o.kernels && o.format != "json" && r.timed) std::cout << reports::kernel_table(r);
  if (o.format != "json")
    std::cout << "\nwrote " << dir << "/result.json" << (o.trace ? ", trace.json" : "") << (o.html ? ", report.html" : "") << "\n";
  // The results are written either way: a CI job keeps them as the evidence of what failed.
  if (o.require_fit && !r.fits) {
    std::cerr << "error: " << reports::does_not_fit(r) << " (--require-fit)\n";
    return 3;
  }
  return 0;
}

int memory(const std::string& scenario, const std::string& format) {
  print(results::memory_only(config::load_scenario(scenario)), format);
  return 0;
}

namespace {
reports::Tolerances tolerances(const CompareOptions& o) {
  if (o.rel_tol != -1 && (!std::isfinite(o.rel_tol) || o.rel_tol < 0))
    throw InputError("", "--rel-tol", fmt::format("{} is not a tolerance: give a finite share >= 0, e.g. 0.02", o.rel_tol));
  reports::Tolerances t;
  t.fallback = o.rel_tol;
  for (const auto& m : o.metrics) reports::add_metric_tolerance(t, m);
  return t;
}

// A change between two different runs is no regression of either; say so, or refuse.
void check_same_scenario(const CompareOptions& o, const Json& b, const Json& c) {
  const auto diffs = reports::scenario_differences(b, c);
  if (diffs.empty()) return;
  if (o.strict) {
    const auto& d = diffs.front();
    throw InputError(o.candidate, d.pointer,
                     fmt::format("{} here, {} in {}: results of different scenarios (--strict)", d.candidate, d.baseline, o.baseline));
  }
  std::string what;
  for (const auto& d : diffs) what += fmt::format("{}{}: {} vs {}", what.empty() ? "" : "; ", d.pointer, d.baseline, d.candidate);
  std::cerr << fmt::format("warning: {} and {} are results of different scenarios ({}); --strict makes this an error\n",
                           o.baseline, o.candidate, what);
}
}  // namespace

int compare(const CompareOptions& o) {
  const reports::Tolerances tol = tolerances(o);
  if (!o.html.empty()) check_output_path(o.html);
  const Json b = parse_json_file(o.baseline), c = parse_json_file(o.candidate);
  reports::check_result(b, o.baseline);
  reports::check_result(c, o.candidate);
  check_same_scenario(o, b, c);
  const auto cmp = reports::compare(b, c, tol);
  // A metric asked for by name that one of the results lacks (tokens for an image model) was not
  // checked: say so rather than pass it silently.
  for (const auto& [pointer, _] : tol.by_pointer)
    if (std::none_of(cmp.metrics.begin(), cmp.metrics.end(), [&](const auto& m) { return m.pointer == pointer; }))
      std::cerr << fmt::format("warning: --metric {}: not in both results, not compared\n", pointer);
  if (!o.html.empty())
    write_file_atomic(o.html, reports::html_compare(b, c, o.baseline, o.candidate, tol, report_beside(o.baseline, o.html),
                                                    report_beside(o.candidate, o.html)));
  if (o.format == "json") {
    std::cout << reports::comparison_json(cmp, o.baseline, o.candidate).dump(2) << "\n";
  } else if (o.format == "junit") {
    std::cout << reports::comparison_junit(cmp, o.baseline, o.candidate);
  } else {
    for (const auto& l : cmp.lines) std::cout << l << "\n";
    std::cout << (cmp.regression ? "regression found" : "no regression") << "\n";
    if (!o.html.empty()) std::cout << "wrote " << o.html << "\n";
  }
  return cmp.regression ? 3 : 0;
}

}  // namespace dtsim::cli
