#include "sim/calibrate/fit_report.hpp"

#include <fmt/format.h>

#include <cmath>
#include <map>

#include "sim/calibrate/text_input.hpp"

namespace dtsim::calibrate {

using Ordered = nlohmann::ordered_json;

double rms_relative(const std::vector<std::pair<double, double>>& pm) {
  if (pm.empty()) return 0;
  double ss = 0;
  for (const auto& [p, m] : pm) ss += std::pow(p / m - 1, 2);
  return std::sqrt(ss / static_cast<double>(pm.size()));
}

namespace {

double r6(double v) { return rounded(v, 6); }
std::string pct(double rel) { return fmt::format("{:+.2f} %", rel * 100); }

struct Rms {
  std::vector<std::pair<double, double>> base, fitted;
  void add(double measured, double b, double f) {
    base.emplace_back(b, measured);
    fitted.emplace_back(f, measured);
  }
};

// ---- collectives ----

Ordered tier_json(const TierFit& t) {
  const bool intra = t.tier == Tier::IntraNode;
  return Ordered{{"tier", to_string(t.tier)},
                 {"rows", t.rows},
                 {intra ? "bandwidth_GBps" : "nic_bandwidth_GBps",
                  {{"base", r6(t.base_bandwidth / 1e9)}, {"fitted", r6(t.bandwidth / 1e9)}, {"was_fitted", t.bandwidth_fitted}}},
                 {"latency_us", {{"base", r6(t.base_latency_s * 1e6)}, {"fitted", r6(t.latency_s * 1e6)}, {"was_fitted", t.latency_fitted}}},
                 {"solves", t.solves},
                 {"note", t.note}};
}

Ordered collectives_json(const Calibration& c) {
  const CollectiveFit& fit = *c.collectives;
  Ordered files = Ordered::array();
  Rms all;
  for (std::size_t i = 0; i < c.nccl.size(); ++i) {
    const auto& f = c.nccl[i];
    Ordered rows = Ordered::array();
    Rms one;
    for (const auto& r : fit.rows) {
      if (r.file != i) continue;
      one.add(r.measured_s, r.base_s, r.fitted_s);
      all.add(r.measured_s, r.base_s, r.fitted_s);
      rows.push_back({{"line", r.line}, {"size_bytes", r.size}, {"measured_us", r6(r.measured_s * 1e6)}, {"base_us", r6(r.base_s * 1e6)},
                      {"fitted_us", r6(r.fitted_s * 1e6)}, {"base_error", r6(r.base_s / r.measured_s - 1)},
                      {"fitted_error", r6(r.fitted_s / r.measured_s - 1)}});
    }
    std::map<std::string, int> hosts;
    for (const auto& h : f.host_of_rank) ++hosts[h];
    Ordered file{{"file", f.path}, {"test", f.test}, {"test_named_by", f.op_from}, {"ranks", f.ranks()}, {"nodes", hosts.size()},
                 {"runs_as", fit.runs_as[i]}, {"zero_byte_rows_skipped", f.zero_rows}};
    if (f.avg_busbw) file["avg_bus_bandwidth_GBps"] = *f.avg_busbw;
    file["rms_error"] = {{"base", r6(rms_relative(one.base))}, {"fitted", r6(rms_relative(one.fitted))}};
    file["rows"] = rows;
    files.push_back(file);
  }
  Ordered tiers = Ordered::array();
  for (const auto& t : fit.tiers) tiers.push_back(tier_json(t));
  return Ordered{{"tiers", tiers},
                 {"rms_error", {{"base", r6(rms_relative(all.base))}, {"fitted", r6(rms_relative(all.fitted))}}},
                 {"files", files}};
}

std::string tier_text(const TierFit& t) {
  const bool intra = t.tier == Tier::IntraNode;
  auto value = [](double base, double fitted, bool was) {
    return was ? fmt::format("{:.6g} -> {:.6g}", base, fitted) : fmt::format("{:.6g} (kept)", base);
  };
  std::string out = fmt::format("{}: {} {}, latency_us {}  [{} rows, {} closed-form solves]\n", to_string(t.tier),
                                intra ? "bandwidth_GBps" : "nic_bandwidth_GBps",
                                value(t.base_bandwidth / 1e9, t.bandwidth / 1e9, t.bandwidth_fitted),
                                value(t.base_latency_s * 1e6, t.latency_s * 1e6, t.latency_fitted), t.rows, t.solves);
  return t.note.empty() ? out : out + "  note: " + t.note + "\n";
}

std::string collectives_text(const Calibration& c) {
  const CollectiveFit& fit = *c.collectives;
  std::string out = "== Collectives (nccl-tests) ==\n";
  Rms all;
  for (std::size_t i = 0; i < c.nccl.size(); ++i) {
    const auto& f = c.nccl[i];
    std::map<std::string, int> hosts;
    for (const auto& h : f.host_of_rank) ++hosts[h];
    out += fmt::format("{}: {} (named by {}), {} ranks on {} node(s), runs in dtsim as {}\n", f.path, f.test, f.op_from, f.ranks(),
                       hosts.size(), fit.runs_as[i]);
    out += fmt::format("  {:>6} {:>12} {:>12} {:>12} {:>9} {:>12} {:>9}\n", "line", "size_B", "measured_us", "base_us", "error",
                       "fitted_us", "error");
    Rms one;
    for (const auto& r : fit.rows) {
      if (r.file != i) continue;
      one.add(r.measured_s, r.base_s, r.fitted_s);
      all.add(r.measured_s, r.base_s, r.fitted_s);
      out += fmt::format("  {:>6} {:>12.0f} {:>12.6g} {:>12.6g} {:>9} {:>12.6g} {:>9}\n", r.line, r.size, r.measured_s * 1e6, r.base_s * 1e6,
                         pct(r.base_s / r.measured_s - 1), r.fitted_s * 1e6, pct(r.fitted_s / r.measured_s - 1));
    }
    out += fmt::format("  RMS relative error: base {:.3g} %, fitted {:.3g} %\n", rms_relative(one.base) * 100, rms_relative(one.fitted) * 100);
  }
  for (const auto& t : fit.tiers) out += tier_text(t);
  out += fmt::format("All rows: RMS relative error base {:.3g} %, fitted {:.3g} %\n\n", rms_relative(all.base) * 100,
                     rms_relative(all.fitted) * 100);
  return out;
}

}  // namespace
}  // namespace dtsim::calibrate

namespace dtsim::calibrate {
namespace {

// ---- kernels ----

Ordered curve_json(const CurveFit& f) {
  Ordered o{{"key", f.key}, {"was_fitted", f.fitted}, {"rows_used", f.rows_used}};
  if (f.key == "attention.flash_efficiency") {
    o["flash_efficiency"] = {{"base", r6(f.base_max)}, {"fitted", r6(f.max)}};
  } else {
    o["max"] = {{"base", r6(f.base_max)}, {"fitted", r6(f.max)}};
    o["half_flops"] = {{"base", r6(f.base_half)}, {"fitted", r6(f.half)}};
    o["base_points_dropped"] = f.dropped_points;
  }
  o["note"] = f.note;
  return o;
}

Ordered kernels_json(const KernelFit& k) {
  Ordered curves = Ordered::array(), rows = Ordered::array();
  for (const auto& c : k.curves) {
    Rms used, every;
    for (const auto& r : k.rows)
      if (r.curve == c.key) {
        every.add(r.measured_s, r.base_s, r.fitted_s);
        if (r.used) used.add(r.measured_s, r.base_s, r.fitted_s);
      }
    Ordered o = curve_json(c);
    o["rms_error_rows_used"] = {{"base", r6(rms_relative(used.base))}, {"fitted", r6(rms_relative(used.fitted))}};
    o["rms_error_all_rows"] = {{"base", r6(rms_relative(every.base))}, {"fitted", r6(rms_relative(every.fitted))}};
    curves.push_back(o);
  }
  for (const auto& r : k.rows)
    rows.push_back({{"file", r.file}, {"line", r.line}, {"curve", r.curve}, {"flops", r6(r.flops)}, {"measured_us", r6(r.measured_s * 1e6)},
                    {"base_us", r6(r.base_s * 1e6)}, {"fitted_us", r6(r.fitted_s * 1e6)}, {"base_error", r6(r.base_s / r.measured_s - 1)},
                    {"fitted_error", r6(r.fitted_s / r.measured_s - 1)}, {"bound", r.bound}, {"used", r.used}});
  return Ordered{{"curves", curves}, {"rows", rows}};
}

std::string kernels_text(const KernelFit& k) {
  std::string out = "== Kernels (microbenchmarks) ==\n";
  for (const auto& c : k.curves) {
    if (c.key == "attention.flash_efficiency")
      out += fmt::format("{}: {}", c.key, c.fitted ? fmt::format("{:.6g} -> {:.6g}", c.base_max, c.max) : fmt::format("{:.6g} (kept)", c.base_max));
    else
      out += fmt::format("{}: max {}, half_flops {}{}", c.key, c.fitted ? fmt::format("{:.6g} -> {:.6g}", c.base_max, c.max) : "kept",
                         c.fitted ? fmt::format("{:.6g} -> {:.6g}", c.base_half, c.half) : "kept",
                         c.dropped_points ? " (the base's measured points dropped)" : "");
    out += fmt::format("  [{} rows used]\n", c.rows_used);
    if (!c.note.empty()) out += "  note: " + c.note + "\n";
    out += fmt::format("  {:<28} {:>10} {:>12} {:>12} {:>9} {:>12} {:>9}  {}\n", "row", "GFLOP", "measured_us", "base_us", "error",
                       "fitted_us", "error", "priced by");
    Rms used;
    for (const auto& r : k.rows) {
      if (r.curve != c.key) continue;
      if (r.used) used.add(r.measured_s, r.base_s, r.fitted_s);
      out += fmt::format("  {:<28} {:>10.4g} {:>12.6g} {:>12.6g} {:>9} {:>12.6g} {:>9}  {}{}\n", fmt::format("{}:{}", r.file, r.line),
                         r.flops / 1e9, r.measured_s * 1e6, r.base_s * 1e6, pct(r.base_s / r.measured_s - 1), r.fitted_s * 1e6,
                         pct(r.fitted_s / r.measured_s - 1), r.bound, r.used ? "" : " (not used)");
    }
    out += fmt::format("  RMS relative error of the rows used: base {:.3g} %, fitted {:.3g} %\n", rms_relative(used.base) * 100,
                       rms_relative(used.fitted) * 100);
  }
  return out + "\n";
}

// ---- trace and steps ----

Ordered trace_json(const Calibration& c) {
  const TraceSummary& s = *c.trace;
  double total = 0;
  for (double b : s.busy_us) total += b;
  Ordered roles = Ordered::object();
  for (int i = 0; i < kTraceRoles; ++i)
    roles[to_string(static_cast<TraceRole>(i))] = {{"kernels", s.count[i]}, {"busy_us", r6(s.busy_us[i])},
                                                   {"share_of_busy", total > 0 ? r6(s.busy_us[i] / total) : 0.0}};
  Ordered o{{"file", c.trace_file}, {"span_us", r6(s.span_us)}, {"gpu_idle_us", r6(s.gpu_idle_us)}, {"roles", roles},
            {"dispatch_us", r6(s.dispatch_us)}, {"launch_intervals", s.launch_intervals}, {"launch_call_us", r6(s.launch_call_us)},
            {"median_idle_gap_us", r6(s.gap_us)}, {"idle_gaps", s.gaps}, {"host_bound_kernels", s.host_bound_kernels}};
  if (c.dispatch) o["stack"] = {{"preset", c.dispatch->stack}, {"dispatch_us", r6(c.dispatch->preset_us)}};
  return o;
}

std::string trace_text(const Calibration& c) {
  const TraceSummary& s = *c.trace;
  double total = 0;
  for (double b : s.busy_us) total += b;
  std::string out = fmt::format("== Profiler trace ==\n{}: {:.6g} us from the first kernel to the last, GPU streams idle {:.6g} us\n",
                                c.trace_file, s.span_us, s.gpu_idle_us);
  out += fmt::format("  {:<14} {:>8} {:>12} {:>8}\n", "role", "kernels", "busy_us", "share");
  for (int i = 0; i < kTraceRoles; ++i)
    if (s.count[i] > 0)
      out += fmt::format("  {:<14} {:>8} {:>12.6g} {:>7.2f}%\n", to_string(static_cast<TraceRole>(i)), s.count[i], s.busy_us[i],
                         total > 0 ? 100 * s.busy_us[i] / total : 0.0);
  out += fmt::format("Host dispatch per kernel (median launch-to-launch on a thread, {} intervals): {:.4g} us; the launch call "
                     "itself {:.4g} us; median idle gap before a kernel {:.4g} us ({} gaps, {} of them paced by the host)\n",
                     s.launch_intervals, s.dispatch_us, s.launch_call_us, s.gap_us, s.gaps, s.host_bound_kernels);
  if (c.dispatch)
    out += fmt::format("Stack \"{}\" prices {:.4g} us per kernel ({}); the trace measured {:.4g} us. A scenario's stack has no "
                       "key for it: reported, not written.\n",
                       c.dispatch->stack, c.dispatch->preset_us, "sim/cost/stack.cpp", s.dispatch_us);
  return out + "\n";
}

Ordered steps_json(const StepComparison& s) {
  return Ordered{{"log", s.log},           {"scenario", s.scenario},         {"steps", s.steps},
                 {"median_s", r6(s.median_s)}, {"mean_s", r6(s.mean_s)},       {"min_s", r6(s.min_s)},
                 {"max_s", r6(s.max_s)},    {"predicted_s", r6(s.predicted_s)}, {"error", r6(s.error)},
                 {"fitted", "nothing: see docs/calibrate.md, \"Step times\""}};
}

std::string steps_text(const StepComparison& s) {
  return fmt::format("== Step times ==\n{}: {} steps, median {:.6g} s (mean {:.6g}, {:.6g} to {:.6g})\n{}: dtsim predicts {:.6g} s, "
                     "{} against the median. Nothing is fitted to step times (docs/calibrate.md, \"Step times\").\n\n",
                     s.log, s.steps, s.median_s, s.mean_s, s.min_s, s.max_s, s.scenario, s.predicted_s, pct(s.error));
}

}  // namespace

nlohmann::ordered_json report_json(const Calibration& c) {
  Ordered o{{"base", {{"device", c.base_device}, {"cluster", c.base_cluster}}}, {"written", c.written}};
  if (c.collectives) o["collectives"] = collectives_json(c);
  if (c.kernels) o["kernels"] = kernels_json(*c.kernels);
  if (c.trace) o["trace"] = trace_json(c);
  if (c.steps) o["steps"] = steps_json(*c.steps);
  return o;
}

std::string report_text(const Calibration& c) {
  std::string out = "dtsim calibrate\n";
  if (!c.base_device.empty()) out += "base device: " + c.base_device + "\n";
  if (!c.base_cluster.empty()) out += "base cluster: " + c.base_cluster + "\n";
  for (const auto& w : c.written) out += "wrote: " + w + "\n";
  out += "\n";
  if (c.collectives) out += collectives_text(c);
  if (c.kernels) out += kernels_text(*c.kernels);
  if (c.trace) out += trace_text(c);
  if (c.steps) out += steps_text(*c.steps);
  return out;
}

}  // namespace dtsim::calibrate
