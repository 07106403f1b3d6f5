// `compare`'s per-metric tolerances and its machine-readable outputs (JSON, JUnit XML) for CI.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

#include "reports/reports.hpp"
#include "sim/core/errors.hpp"
#include "sim/core/suggest.hpp"

namespace dtsim::reports {

const std::vector<MetricInfo>& known_metrics() {
  static const std::vector<MetricInfo> metrics = {
      {"step_time_s", "/step_time_s", true, true, 0.02},
      {"throughput.samples_per_s", "/throughput/samples_per_s", false, true, 0.02},
      {"flops.mfu", "/flops/mfu", false, true, 0.02},
      {"memory.peak_bytes", "/memory/peak_bytes", true, true, 0.05},
      // Compared only when named: they move with the ones above.
      {"throughput.tokens_per_s", "/throughput/tokens_per_s", false, false, 0.02},
      {"flops.hfu", "/flops/hfu", false, false, 0.02},
      {"flops.model_tflops_per_gpu", "/flops/model_tflops_per_gpu", false, false, 0.02},
  };
  return metrics;
}

double Tolerances::of(const std::string& pointer) const {
  if (const auto it = by_pointer.find(pointer); it != by_pointer.end()) return it->second;
  if (fallback >= 0) return fallback;
  for (const auto& m : known_metrics())
    if (m.pointer == pointer) return m.default_tolerance;
  return 0.02;
}

namespace {
// "memory.peak_bytes" and "/memory/peak_bytes" name the same metric.
std::string as_pointer(const std::string& name) {
  if (!name.empty() && name.front() == '/') return name;
  std::string p = "/" + name;
  for (char& c : p)
    if (c == '.') c = '/';
  return p;
}
}  // namespace

void add_metric_tolerance(Tolerances& t, const std::string& arg) {
  const auto eq = arg.find('=');
  if (eq == std::string::npos)
    throw InputError("", "--metric", fmt::format("\"{}\" is not METRIC=TOLERANCE (e.g. step_time_s=0.02)", arg));
  const std::string name = arg.substr(0, eq), value = arg.substr(eq + 1);
  const std::string pointer = as_pointer(name);
  std::vector<std::string> names;
  const MetricInfo* found = nullptr;
  for (const auto& m : known_metrics()) {
    names.push_back(m.name);
    if (m.pointer == pointer) found = &m;
  }
  if (pointer == "/memory/fits")
    throw InputError("", "--metric", "memory.fits is yes or no: a plan that stops fitting is always a regression, no tolerance applies");
  if (!found)
    throw InputError("", "--metric",
                     fmt::format("unknown metric \"{}\"{}; known: {}", name, did_you_mean(name, names), fmt::join(names, ", ")));
  double tol = -1;
  std::size_t used = 0;
  try {
    tol = std::stod(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != value.size() || !std::isfinite(tol) || tol < 0 || tol > 10)
    throw InputError("", "--metric",
                     fmt::format("\"{}\" for {} is not a tolerance: give a share between 0 and 10, e.g. 0.02 for 2%", value, name));
  t.by_pointer[found->pointer] = tol;
}

nlohmann::ordered_json comparison_json(const Comparison& c, const std::string& baseline_file, const std::string& candidate_file) {
  nlohmann::ordered_json metrics = nlohmann::ordered_json::array();
  for (const auto& m : c.metrics) {
    nlohmann::ordered_json j{{"metric", m.name}, {"pointer", m.pointer}};
    if (m.is_flag) {
      j["baseline"] = m.baseline != 0;
      j["candidate"] = m.candidate != 0;
    } else {
      j["baseline"] = m.baseline;
      j["candidate"] = m.candidate;
      j["change"] = m.change;
      j["tolerance"] = m.tolerance;
    }
    j["regression"] = m.regression;
    metrics.push_back(j);
  }
  return {{"baseline", baseline_file}, {"candidate", candidate_file}, {"regression", c.regression}, {"metrics", metrics}};
}

namespace {
// Text for an XML attribute or element. XML 1.0 forbids control characters other than tab, LF
// and CR even as references: they become U+FFFD.
std::string xml(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else if (c == '"') o += "&quot;";
    else if (c == '\'') o += "&apos;";
    else if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') o += "\xEF\xBF\xBD";
    else o += c;
  }
  return o;
}

std::string verdict(const MetricResult& m) {
  if (m.is_flag) return fmt::format("fits: {} -> {}", m.baseline != 0, m.candidate != 0);
  return fmt::format("{:.6g} -> {:.6g} ({:+.2f}%, tolerance {:g}%)", m.baseline, m.candidate, 100 * m.change, 100 * m.tolerance);
}
}  // namespace

std::string comparison_junit(const Comparison& c, const std::string& baseline_file, const std::string& candidate_file) {
  int failures = 0;
  for (const auto& m : c.metrics) failures += m.regression;
  const std::string suite = xml("dtsim compare " + baseline_file + " vs " + candidate_file);
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x += fmt::format("<testsuites name=\"dtsim compare\" tests=\"{}\" failures=\"{}\" errors=\"0\">\n", c.metrics.size(), failures);
  x += fmt::format("  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"0\">\n", suite, c.metrics.size(), failures);
  for (const auto& m : c.metrics) {
    x += fmt::format("    <testcase classname=\"dtsim.compare\" name=\"{}\">\n", xml(m.name));
    if (m.regression)
      x += fmt::format("      <failure message=\"{} regressed: {}\" type=\"regression\">{}</failure>\n", xml(m.name), xml(verdict(m)),
                       xml(verdict(m)));
    x += fmt::format("      <system-out>{}</system-out>\n", xml(verdict(m)));
    x += "    </testcase>\n";
  }
  return x + "  </testsuite>\n</testsuites>\n";
}

}  // namespace dtsim::reports
