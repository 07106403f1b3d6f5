#include "sim/calibrate/kernel_fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <set>

#include "sim/calibrate/least_squares.hpp"
#include "sim/calibrate/text_input.hpp"
#include "sim/core/errors.hpp"

namespace dtsim::calibrate {

namespace {

struct Sample {
  std::string file;
  int line = 0;
  models::Kernel kernel;
  std::string dtype;  // as kernel_time takes it
  double measured_s = 0, peak = 0;
};

// The terms of dtsim's own kernel time, each through cost::kernel_time itself: the compute term
// alone (memory free, no floor), the memory term alone (no FLOPs), and the floor.
double compute_s(const cost::DeviceProfile& d, const Sample& s) {
  cost::DeviceProfile free_memory = d;
  free_memory.hbm_bandwidth = std::numeric_limits<double>::infinity();
  free_memory.kernel_min_s = 0;
  return cost::kernel_time(free_memory, s.kernel, s.dtype);
}
double memory_s(const cost::DeviceProfile& d, const Sample& s) {
  cost::DeviceProfile no_floor = d;
  no_floor.kernel_min_s = 0;
  models::Kernel k = s.kernel;
  k.flops = 0;
  return cost::kernel_time(no_floor, k, s.dtype);
}
std::string bound_of(const cost::DeviceProfile& d, const Sample& s) {
  const double c = compute_s(d, s), m = memory_s(d, s);
  if (c >= m && c >= d.kernel_min_s) return "compute";
  return m >= d.kernel_min_s ? "memory" : "kernel floor";
}

Sample sample(const cost::DeviceProfile& d, const std::string& file, int line, const models::Kernel& k, const std::string& dtype,
              double measured_s) {
  const std::string peak_key = k.fp8 ? "fp8" : dtype;
  const auto it = d.peak_flops.find(peak_key);
  if (it == d.peak_flops.end())
    throw InputError(file, std::to_string(line), fmt::format("device \"{}\" has no {} peak to price this row at", d.name, peak_key));
  if (k.flops / measured_s > it->second * 1.001)
    throw InputError(file, std::to_string(line),
                     fmt::format("{:.1f} TFLOP/s is above the device \"{}\"'s {} peak, {:.1f}: a wrong time, dtype or --base-device?",
                                 k.flops / measured_s / 1e12, d.name, peak_key, it->second / 1e12));
  return {file, line, k, dtype, measured_s, it->second};
}

}  // namespace

namespace {

using Samples = std::vector<const Sample*>;

// The rows whose compute term prices them on `d` (and, for attention, whose efficiency is the
// flash cap rather than the GEMM curve): those the curve's unknowns govern.
Samples governed(const cost::DeviceProfile& d, const std::vector<Sample>& all, bool attention) {
  Samples out;
  for (const auto& s : all) {
    if (bound_of(d, s) != "compute") continue;
    if (attention && !(d.flash_attention_efficiency < d.gemm.at(s.kernel.flops))) continue;
    out.push_back(&s);
  }
  return out;
}

// Least squares of the relative error of (F + half)/(max·peak) against each time, in u = 1/max
// and v = half/max; one size cannot separate them, so half is then kept.
bool solve_curve(cost::EfficiencyCurve& c, const Samples& used) {
  std::set<double> sizes;
  for (const auto* s : used) sizes.insert(s->kernel.flops);
  std::vector<Equation> eqs;
  Bounds b;
  b.min = {1.0, 0.0};  // max <= 1, half >= 0
  for (const auto* s : used) {
    const double scale = 1.0 / (s->peak * s->measured_s);
    eqs.push_back(sizes.size() > 1 ? Equation{s->kernel.flops * scale, scale, 1.0} : Equation{(s->kernel.flops + c.half) * scale, 0.0, 1.0});
  }
  if (sizes.size() < 2) b.fixed[1] = 0.0;
  const auto x = solve(eqs, b);
  if (!x) return false;
  c.max = rounded(1.0 / (*x)[0]);
  if (sizes.size() > 1) c.half = rounded((*x)[1] / (*x)[0]);
  return true;
}

CurveFit fit_curve(cost::DeviceProfile& d, const std::string& key, const std::vector<Sample>& all) {
  if (key == "fp8_gemm_efficiency" && !d.fp8_gemm) d.fp8_gemm = d.gemm;  // absent: FP8 ran on the 16-bit curve
  cost::EfficiencyCurve& c = key == "fp8_gemm_efficiency" ? *d.fp8_gemm : d.gemm;
  const cost::EfficiencyCurve base = c;
  CurveFit f;
  f.key = key;
  f.base_max = f.max = base.max;
  f.base_half = f.half = base.half;
  c.points.clear();  // fitted, max and half describe every size; measured points would override them
  Samples used = governed(d, all, false);
  for (int round = 0; round < 10 && !used.empty(); ++round) {
    if (!solve_curve(c, used)) break;
    f.fitted = true;
    const Samples next = governed(d, all, false);
    if (next == used) break;
    used = next;
  }
  if (!f.fitted || used.empty()) {
    c = base;
    f.fitted = false;
    f.note = "every row is priced by memory traffic or the kernel floor, not the curve: kept";
    return f;
  }
  f.dropped_points = !base.points.empty();
  f.max = c.max, f.half = c.half, f.rows_used = static_cast<int>(used.size());
  std::set<double> sizes;
  for (const auto* s : used) sizes.insert(s->kernel.flops);
  if (sizes.size() < 2) f.note = "one GEMM size cannot separate max from half_flops: half_flops kept";
  return f;
}

CurveFit fit_flash(cost::DeviceProfile& d, const std::vector<Sample>& all) {
  const double base = d.flash_attention_efficiency;
  CurveFit f;
  f.key = "attention.flash_efficiency";
  f.base_max = f.max = base;
  d.flash_attention_efficiency = 1.0;  // uncapped: which rows the cap can govern at all
  Samples used = governed(d, all, false);
  for (int round = 0; round < 10 && !used.empty(); ++round) {
    std::vector<Equation> eqs;
    for (const auto* s : used) eqs.push_back({s->kernel.flops / (s->peak * s->measured_s), 0.0, 1.0});
    Bounds b;
    b.min = {1.0, 0.0};
    b.fixed[1] = 0.0;
    const auto x = solve(eqs, b);
    if (!x) break;
    d.flash_attention_efficiency = rounded(1.0 / (*x)[0]);
    f.fitted = true;
    const Samples next = governed(d, all, true);
    if (next == used) break;
    used = next;
  }
  if (!f.fitted || used.empty()) {
    d.flash_attention_efficiency = base;
    f.fitted = false;
    f.note = "the GEMM curve, memory or the floor price every row: attention runs at or above what the curve gives, and "
             "flash_efficiency only caps it: kept";
    return f;
  }
  f.max = d.flash_attention_efficiency;
  f.rows_used = static_cast<int>(used.size());
  return f;
}

}  // namespace

KernelFit fit_kernels(const cost::DeviceProfile& base, const std::vector<std::pair<std::string, std::vector<GemmRow>>>& gemm,
                      const std::vector<std::pair<std::string, std::vector<AttentionRow>>>& attention) {
  std::vector<Sample> sixteen, eight, attn;
  for (const auto& [file, rows] : gemm)
    for (const auto& r : rows) (r.dtype == "fp8" ? eight : sixteen).push_back(sample(base, file, r.line, r.kernel(), peak_dtype(r.dtype), r.time_s));
  for (const auto& [file, rows] : attention)
    for (const auto& r : rows) attn.push_back(sample(base, file, r.line, r.kernel(), r.dtype, r.time_s));
  KernelFit out;
  out.device = base;
  // The GEMM curves first: attention below the flash cap is priced on the GEMM curve.
  if (!sixteen.empty()) out.curves.push_back(fit_curve(out.device, "gemm_efficiency", sixteen));
  if (!eight.empty()) out.curves.push_back(fit_curve(out.device, "fp8_gemm_efficiency", eight));
  if (!attn.empty()) out.curves.push_back(fit_flash(out.device, attn));
  const Samples sixteen_used = governed(out.device, sixteen, false), eight_used = governed(out.device, eight, false);
  const Samples attn_used = governed(out.device, attn, true);
  auto add = [&](const std::vector<Sample>& all, const Samples& used, const std::string& curve) {
    for (const auto& s : all)
      out.rows.push_back({s.file, s.line, curve, s.kernel.flops, s.measured_s, cost::kernel_time(base, s.kernel, s.dtype),
                          cost::kernel_time(out.device, s.kernel, s.dtype), bound_of(out.device, s),
                          std::find(used.begin(), used.end(), &s) != used.end()});
  };
  add(sixteen, sixteen_used, "gemm_efficiency");
  add(eight, eight_used, "fp8_gemm_efficiency");
  add(attn, attn_used, "attention.flash_efficiency");
  return out;
}

}  // namespace dtsim::calibrate
