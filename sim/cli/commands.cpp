#include "sim/cli/commands.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <regex>

#include "reports/reports.hpp"
#include "sim/config/scenario.hpp"
#include "sim/core/files.hpp"
#include "sim/core/json_reader.hpp"
#include "sim/core/paths.hpp"

namespace dtsim::cli {

namespace {

std::string default_out_dir(const std::string& name) {
  return "out/" + std::regex_replace(name, std::regex("[^A-Za-z0-9._-]"), "_");
}

void print(const results::Result& r, const std::string& format) {
  if (format == "json") std::cout << results::to_json(r).dump(2) << "\n";
  else std::cout << reports::summary(r);
}

}  // namespace

int run(const RunOptions& o) {
  const config::Scenario s = config::load_scenario(o.scenario);
  const results::Result r = results::simulate(s);
  const std::string dir = o.out_dir.empty() ? default_out_dir(s.name) : o.out_dir;
  write_file_atomic(dir + "/result.json", results::to_json(r, false).dump(2) + "\n");
  write_file_atomic(dir + "/provenance.json", nlohmann::ordered_json{{"dtsim_version", DTSIM_VERSION},
                                                                    {"wall_time_s", r.wall_time_s},
                                                                    {"scenario_file", s.file}}.dump(2) + "\n");
  if (o.trace) write_file_atomic(dir + "/trace.json", reports::chrome_trace(r).dump() + "\n");
  if (o.html) write_file_atomic(dir + "/report.html", reports::html_report(r));
  print(r, o.format);
  if (o.format != "json")
    std::cout << "\nwrote " << dir << "/result.json" << (o.trace ? ", trace.json" : "") << (o.html ? ", report.html" : "") << "\n";
  return 0;
}

int memory(const std::string& scenario, const std::string& format) {
  print(results::memory_only(config::load_scenario(scenario)), format);
  return 0;
}

int list(const std::string& what) {
  std::vector<std::string> names;
  if (what == "models") names = list_json_stems("models/presets");
  else if (what == "devices") names = list_json_stems("hardware_profiles");
  else if (what == "clusters") names = list_json_stems("hardware_profiles/clusters");
  else {
    namespace fs = std::filesystem;
    const fs::path root = fs::path(data_dir()) / "scenarios";
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(root, ec); it != fs::recursive_directory_iterator(); ++it)
      if (it->is_regular_file() && it->path().extension() == ".json")
        names.push_back(fs::relative(it->path(), root).string());
    std::sort(names.begin(), names.end());
  }
  if (what == "models") {  // each preset with its family and parameter count
    for (const auto& n : names) {
      const models::ModelSpec m = config::load_model_preset(n);
      const double params = m.build(models::BuildOptions{}).params();
      std::cout << fmt::format("{:<16} {:<12} {:>10.2f} M parameters\n", n, m.kind(), params / 1e6);
    }
    return 0;
  }
  for (const auto& n : names) std::cout << n << "\n";
  return 0;
}

int compare(const std::string& baseline, const std::string& candidate, double rel_tol) {
  const Json b = parse_json_file(baseline), c = parse_json_file(candidate);
  const auto cmp = reports::compare(b, c, rel_tol);
  for (const auto& l : cmp.lines) std::cout << l << "\n";
  std::cout << (cmp.regression ? "regression found" : "no regression") << fmt::format(" (tolerance {:g}%)\n", 100 * rel_tol);
  return cmp.regression ? 3 : 0;
}

}  // namespace dtsim::cli
