// The tables `dtsim validate` prints: every row against its published figure, then (for a suite)
// each group's error and direction, and how well each ranking set's order is predicted.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "sim/cli/validate.hpp"
#include "sim/core/files.hpp"
#include "sim/results/ranking.hpp"

namespace dtsim::cli {

namespace {

using Ordered = nlohmann::ordered_json;

struct Group {
  int rows = 0, too_fast = 0, too_slow = 0, outside = 0, memory_rows = 0;
  double sum = 0, worst = 0, memory_sum = 0, memory_worst = 0;
};

struct Ranking {
  std::vector<double> predicted, published;
  std::vector<std::string> names;
};

std::string memory_cell(const ValidationRow& r) {
  return r.has_memory() ? fmt::format("{:+.1f}%", r.memory_error_percent()) : "";
}

Ordered print_rows(const std::vector<ValidationRow>& rows, bool suite) {
  Ordered out = Ordered::array();
  std::size_t w = 22;  // the name column fits the longest name, so the columns stay aligned
  for (const auto& r : rows) w = std::max(w, r.name.size());
  std::cout << fmt::format("{:<{}} {:>6} {:>13} {:>13} {:>11} {:>11} {:>8}", "scenario", w, "GPUs", "published_s",
                           "predicted_s", "pub_TFLOPs", "pred_TFLOPs", "error")
            << (suite ? fmt::format(" {:>8} {:>5}  {}", "memory", "ok", "group") : "") << "\n";
  for (const auto& r : rows) {
    if (!r.failure.empty()) {
      std::cout << fmt::format("{:<{}} {:>6} failed: {}", r.name, w, r.gpus, r.failure);
      continue;
    }
    const double err = r.error_percent();
    const bool ok = std::fabs(err) <= r.ref.tolerance_percent;
    auto tflops = [](double v) { return v > 0 ? fmt::format("{:.1f}", v) : std::string("-"); };
    std::cout << fmt::format("{:<{}} {:>6} {:>13.3f} {:>13.3f} {:>11} {:>11} {:>+7.1f}%", r.name, w, r.gpus, r.ref.step_time_s,
                             r.predicted_s, tflops(r.ref.tflops_per_gpu),
                             tflops(r.ref.flops_per_step / (r.predicted_s * r.gpus) / 1e12), err)
              << (suite ? fmt::format(" {:>8} {:>5}  {}", memory_cell(r), ok ? "yes" : "NO", r.ref.group) : "") << "\n";
    Ordered row{{"scenario", r.name}, {"gpus", r.gpus}, {"published_step_time_s", r.ref.step_time_s},
                {"predicted_step_time_s", r.predicted_s}, {"error_percent", err}, {"source", r.ref.source}};
    if (suite) {
      row["group"] = r.ref.group;
      row["tolerance_percent"] = r.ref.tolerance_percent;
      row["within_tolerance"] = ok;
      if (r.has_memory()) {
        row["memory_reading"] = r.ref.memory_reading;
        row["published_peak_memory_bytes"] = r.ref.peak_memory_bytes;
        row["predicted_peak_memory_bytes"] = r.predicted_memory_bytes;
        row["memory_error_percent"] = r.memory_error_percent();
      }
    }
    out.push_back(std::move(row));
  }
  return out;
}

// Groups in name order, so the table and the JSON are the same bytes on every run.
std::map<std::string, Group> group_rows(const std::vector<ValidationRow>& rows) {
  std::map<std::string, Group> groups;
  for (const auto& r : rows) {
    if (!r.failure.empty()) continue;
    Group& g = groups[r.ref.group];
    const double err = r.error_percent();
    ++g.rows;
    g.sum += std::fabs(err);
    g.worst = std::max(g.worst, std::fabs(err));
    (err < 0 ? g.too_fast : g.too_slow) += err != 0 ? 1 : 0;
    g.outside += std::fabs(err) > r.ref.tolerance_percent ? 1 : 0;
    if (r.has_memory()) {
      ++g.memory_rows;
      g.memory_sum += std::fabs(r.memory_error_percent());
      g.memory_worst = std::max(g.memory_worst, std::fabs(r.memory_error_percent()));
    }
  }
  return groups;
}

Ordered print_groups(const std::vector<ValidationRow>& rows) {
  Ordered out = Ordered::array();
  std::cout << fmt::format("\n{:<24} {:>5} {:>11} {:>10} {:>9} {:>9} {:>8} {:>12}\n", "group", "rows", "mean |err|",
                           "max |err|", "too fast", "too slow", "outside", "memory mean");
  for (const auto& [name, g] : group_rows(rows)) {
    const double mean = g.sum / g.rows;
    const std::string mem = g.memory_rows ? fmt::format("{:.1f}%", g.memory_sum / g.memory_rows) : "";
    std::cout << fmt::format("{:<24} {:>5} {:>10.1f}% {:>9.1f}% {:>9} {:>9} {:>8} {:>12}\n", name, g.rows, mean, g.worst,
                             g.too_fast, g.too_slow, g.outside, mem);
    Ordered j{{"group", name},       {"rows", g.rows},         {"mean_abs_error_percent", mean},
              {"max_abs_error_percent", g.worst}, {"too_fast", g.too_fast}, {"too_slow", g.too_slow},
              {"outside_tolerance", g.outside}};
    if (g.memory_rows) {
      j["memory_rows"] = g.memory_rows;
      j["memory_mean_abs_error_percent"] = g.memory_sum / g.memory_rows;
      j["memory_max_abs_error_percent"] = g.memory_worst;
    }
    out.push_back(std::move(j));
  }
  return out;
}

// Kendall's tau-b over step times: a planner picks by predicted order, so the order is what a
// ranking set checks; top-1: the predicted fastest was the measured fastest.
Ordered print_rankings(const std::vector<ValidationRow>& rows) {
  std::map<std::string, Ranking> sets;
  for (const auto& r : rows)
    if (r.failure.empty() && !r.ref.ranking.empty()) {
      Ranking& k = sets[r.ref.ranking];
      k.predicted.push_back(r.predicted_s);
      k.published.push_back(r.ref.step_time_s);
      k.names.push_back(r.name);
    }
  Ordered out = Ordered::array();
  if (sets.empty()) return out;
  std::size_t w = 24;
  for (const auto& [name, k] : sets) w = std::max(w, name.size());
  std::cout << fmt::format("\n{:<{}} {:>5} {:>8} {:>6}  {}\n", "ranking", w, "rows", "tau-b", "top-1", "measured fastest");
  for (const auto& [name, k] : sets) {
    const auto tau = results::kendall_tau_b(k.predicted, k.published);
    const bool hit = results::top1_hit(k.predicted, k.published);
    const auto fastest = std::min_element(k.published.begin(), k.published.end()) - k.published.begin();
    std::cout << fmt::format("{:<{}} {:>5} {:>8} {:>6}  {}\n", name, w, k.names.size(), tau ? fmt::format("{:+.2f}", *tau) : "-",
                             hit ? "yes" : "no", k.names[static_cast<std::size_t>(fastest)]);
    Ordered j{{"ranking", name}, {"rows", k.names.size()}};
    j["kendall_tau_b"] = tau ? Ordered(*tau) : Ordered(nullptr);
    j["top1_hit"] = hit;
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace

ValidationSummary report_validation(const std::vector<ValidationRow>& rows, const std::string& json_out, bool suite) {
  ValidationSummary s;
  double sum = 0;
  for (const auto& r : rows) {
    if (!r.failure.empty()) {
      ++s.failed;
      continue;
    }
    ++s.rows;
    sum += std::fabs(r.error_percent());
    s.max_abs_error = std::max(s.max_abs_error, std::fabs(r.error_percent()));
    s.outside_tolerance += std::fabs(r.error_percent()) > r.ref.tolerance_percent ? 1 : 0;
  }
  s.mean_abs_error = s.rows > 0 ? sum / s.rows : 0.0;
  Ordered doc{{"rows", print_rows(rows, suite)}};
  if (suite) {
    doc["groups"] = print_groups(rows);
    doc["rankings"] = print_rankings(rows);
  }
  std::cout << fmt::format("\nmean |error| {:.1f}%, max |error| {:.1f}% over {} rows", s.mean_abs_error, s.max_abs_error, s.rows)
            << (suite ? fmt::format(", {} outside tolerance", s.outside_tolerance) : "")
            << (s.failed ? fmt::format(", {} failed", s.failed) : "") << "\n";
  doc["mean_abs_error_percent"] = s.mean_abs_error;
  doc["max_abs_error_percent"] = s.max_abs_error;
  if (!json_out.empty()) write_file_atomic(json_out, doc.dump(2) + "\n");
  return s;
}

}  // namespace dtsim::cli
