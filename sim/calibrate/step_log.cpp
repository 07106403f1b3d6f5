#include "sim/calibrate/step_log.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "sim/calibrate/text_input.hpp"
#include "sim/core/errors.hpp"

namespace dtsim::calibrate {

namespace {

long long step_number(const std::string& file, int line, const std::string& text) {
  const double v = number_at(file, line, text, "step");
  if (v < 0 || v != std::floor(v) || v > 1e15) throw InputError(file, std::to_string(line), fmt::format("step \"{}\" is not a whole number", text));
  return static_cast<long long>(v);
}

double positive_seconds(const std::string& file, int line, const std::string& text, bool ms) {
  const double v = number_at(file, line, text, ms ? "time_ms" : "time_s");
  if (!(v > 0) || v > 1e7) throw InputError(file, std::to_string(line), fmt::format("a step time of {} is not a positive time", text));
  return ms ? v * 1e-3 : v;
}

StepTime key_value_line(const std::string& file, const Line& l) {
  const auto f = fields(l.text);
  if (f.size() % 2 != 0)
    throw InputError(file, std::to_string(l.number), "expected \"key value\" pairs: step N time_s X (or time_ms X)");
  StepTime s;
  s.line = l.number;
  bool step = false, time = false;
  for (std::size_t i = 0; i < f.size(); i += 2) {
    if (f[i] == "step") s.step = step_number(file, l.number, f[i + 1]), step = true;
    if (f[i] == "time_s" || f[i] == "time_ms") s.seconds = positive_seconds(file, l.number, f[i + 1], f[i] == "time_ms"), time = true;
  }
  if (!step || !time) throw InputError(file, std::to_string(l.number), "a line without \"step N\" and \"time_s X\" (or \"time_ms X\")");
  return s;
}

std::vector<StepTime> csv_steps(const std::string& path) {
  const CsvTable t = read_csv(path);
  const bool ms = !t.has("time_s");
  const std::size_t step = t.column("step"), time = t.column(ms ? "time_ms" : "time_s");
  std::vector<StepTime> out;
  for (std::size_t i = 0; i < t.rows.size(); ++i)
    out.push_back({t.rows[i].number, step_number(path, t.rows[i].number, t.cells[i][step]),
                   positive_seconds(path, t.rows[i].number, t.cells[i][time], ms)});
  return out;
}

}  // namespace

std::vector<StepTime> read_step_log(const std::string& path) {
  const auto lines = read_lines(path);
  const auto first = std::find_if(lines.begin(), lines.end(), [](const Line& l) {
    const auto f = fields(l.text);
    return !f.empty() && f.front().front() != '#';
  });
  if (first == lines.end()) throw InputError(path, "", "no steps: expected lines \"step N time_s X\" or a CSV step,time_s");
  std::vector<StepTime> out;
  if (first->text.find(',') != std::string::npos) {
    out = csv_steps(path);
  } else {
    for (const auto& l : lines) {
      const auto f = fields(l.text);
      if (!f.empty() && f.front().front() != '#') out.push_back(key_value_line(path, l));
    }
  }
  std::set<long long> seen;
  for (const auto& s : out)
    if (!seen.insert(s.step).second) throw InputError(path, std::to_string(s.line), fmt::format("step {} is given twice", s.step));
  return out;
}

StepComparison compare_steps(const std::string& log, const std::vector<StepTime>& steps, const std::string& scenario,
                             double predicted_s) {
  StepComparison c{log, scenario, static_cast<int>(steps.size())};
  std::vector<double> t;
  for (const auto& s : steps) t.push_back(s.seconds);
  std::sort(t.begin(), t.end());
  const std::size_t n = t.size();
  c.median_s = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
  for (double v : t) c.mean_s += v / static_cast<double>(n);
  c.min_s = t.front();
  c.max_s = t.back();
  c.predicted_s = predicted_s;
  c.error = predicted_s / c.median_s - 1;
  return c;
}

}  // namespace dtsim::calibrate
