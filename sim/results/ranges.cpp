#include "sim/results/ranges.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "sim/core/json_reader.hpp"
#include "sim/core/paths.hpp"
#include "sim/results/capacity.hpp"
#include "sim/results/result.hpp"

namespace dtsim::results {

namespace {

double phi(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

// P(slowest of n time factors <= x).
double slowest_cdf(double x, double sigma, int n) {
  if (sigma <= 0) return x >= 1.0 ? 1.0 : 0.0;
  return std::pow(phi((x - 1.0) / sigma), n);
}

Spread read_spread(const std::string& path) {
  const Json j = parse_json_file(path);
  Spread s;
  s.device_sigma = j.at("device_spread").at("sigma").get<double>();
  s.device_source = j.at("device_spread").at("source").get<std::string>();
  for (const auto& g : j.at("groups"))
    s.groups.push_back({g.at("group").get<std::string>(), g.at("stacks").get<std::vector<std::string>>(),
                        g.value("frameworks", std::vector<std::string>{}), g.value("model_kinds", std::vector<std::string>{}),
                        g.at("ratios").get<std::vector<double>>()});
  return s;
}

Quantiles quantiles(double point, const std::vector<double>& ratios, double sigma, int gpus) {
  return {step_quantile(point, ratios, sigma, gpus, 0.1), step_quantile(point, ratios, sigma, gpus, 0.5),
          step_quantile(point, ratios, sigma, gpus, 0.9)};
}

Quantiles scaled(const Quantiles& q, double k) { return {q.p10 * k, q.p50 * k, q.p90 * k}; }

}  // namespace

const Spread& shipped_spread() {
  static const Spread s = read_spread(data_dir() + "/hardware_profiles/stacks/validation_residuals.json");
  return s;
}

const ResidualGroup* residual_group(const Spread& s, const std::string& stack, const std::string& framework,
                                    const std::string& model_kind) {
  const auto has = [](const std::vector<std::string>& list, const std::string& x) {
    return std::find(list.begin(), list.end(), x) != list.end();
  };
  for (const auto& g : s.groups)
    if (has(g.stacks, stack) && (g.frameworks.empty() || has(g.frameworks, framework)) &&
        (g.model_kinds.empty() || has(g.model_kinds, model_kind)))
      return &g;
  return nullptr;
}

// The median of the slowest of n: where Phi(z)^n = 1/2.
double slowest_median(double sigma, int n) {
  double lo = 1.0, hi = 1.0 + 10.0 * sigma;
  for (int i = 0; i < 100; ++i) {
    const double mid = 0.5 * (lo + hi);
    (slowest_cdf(mid, sigma, n) < 0.5 ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

namespace {
// step_probability with the median of the slowest already found (`centre`, unused without
// residuals): a quantile's bisection asks for it at one point, sigma and n a hundred times.
double probability_about(double centre, double point, const std::vector<double>& ratios, double sigma, int n, double t) {
  if (ratios.empty()) return slowest_cdf(t / point, sigma, n);
  double p = 0;
  for (double r : ratios) p += slowest_cdf(centre * t / (point * r), sigma, n);
  return p / static_cast<double>(ratios.size());
}
}  // namespace

// With residuals, the measured runs behind them already waited for their slowest GPUs: the
// device spread then widens the range about its median instead of shifting it a second time.
double step_probability(double point, const std::vector<double>& ratios, double sigma, int gpus, double t) {
  const int n = std::max(1, gpus);
  return probability_about(ratios.empty() ? 0.0 : slowest_median(sigma, n), point, ratios, sigma, n, t);
}

// Bisection on the CDF: monotone in t, and 100 halvings of the bracket are far below a ulp.
double step_quantile(double point, const std::vector<double>& ratios, double sigma, int gpus, double q) {
  const double lo_r = ratios.empty() ? 1.0 : *std::min_element(ratios.begin(), ratios.end());
  const double hi_r = ratios.empty() ? 1.0 : *std::max_element(ratios.begin(), ratios.end());
  double lo = point * lo_r * (1.0 - 10.0 * sigma), hi = point * hi_r * (1.0 + 10.0 * sigma) + 1e-12;
  const int n = std::max(1, gpus);
  const double centre = ratios.empty() ? 0.0 : slowest_median(sigma, n);  // found once, not per halving
  for (int i = 0; i < 100; ++i) {
    const double mid = 0.5 * (lo + hi);
    (probability_about(centre, point, ratios, sigma, n, mid) < q ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

RangeReport range_report(const Result& r, const Spread& s) {
  RangeReport out;
  const auto& spec = r.scenario_spec;
  const auto* g = residual_group(s, spec.device.stack.name, strategies::to_string(spec.parallelism.framework.framework),
                                 spec.model.kind());
  const std::vector<double> ratios = g ? g->ratios : std::vector<double>{};
  out.residual_group = g ? g->group : "";
  out.residual_rows = static_cast<int>(ratios.size());
  out.device_sigma = s.device_sigma;
  out.gpus = r.gpus;
  out.step_time_s = quantiles(r.step_time_s, ratios, s.device_sigma, r.gpus);
  if (!r.capacity || r.capacity->steps == 0 || r.step_time_s <= 0) return out;
  const CapacityPlan& c = *r.capacity;
  // The run scales with the step: failures and checkpoints cost the same share at any speed.
  const double days_per_step_s = c.time_s / r.step_time_s / 86400.0;
  out.days = scaled(out.step_time_s, days_per_step_s);
  if (c.cost_usd > 0) out.cost_usd = scaled(out.step_time_s, c.cost_usd / r.step_time_s);
  if (spec.deadline_days > 0)
    out.deadline_probability = step_probability(r.step_time_s, ratios, s.device_sigma, r.gpus, spec.deadline_days / days_per_step_s);
  if (spec.budget_usd > 0 && c.cost_usd > 0)
    out.budget_probability =
        step_probability(r.step_time_s, ratios, s.device_sigma, r.gpus, spec.budget_usd / (c.cost_usd / r.step_time_s));
  return out;
}

nlohmann::ordered_json range_json(const RangeReport& r) {
  auto q = [](const Quantiles& x) { return nlohmann::ordered_json{{"p10", x.p10}, {"p50", x.p50}, {"p90", x.p90}}; };
  nlohmann::ordered_json j{{"step_time_s", q(r.step_time_s)}};
  if (r.days) j["time_to_train_days"] = q(*r.days);
  if (r.cost_usd) j["cost_usd"] = q(*r.cost_usd);
  if (r.deadline_probability) j["deadline_probability"] = *r.deadline_probability;
  if (r.budget_probability) j["budget_probability"] = *r.budget_probability;
  j["sources"] = {{"device_spread_sigma", r.device_sigma}, {"gpus", r.gpus},
                  {"validation_group", r.residual_group.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.residual_group)},
                  {"validation_rows", r.residual_rows}};
  return j;
}

std::string range_text(const RangeReport& r) {
  std::string out = fmt::format("range (P10 / P50 / P90)  step {:.4g} / {:.4g} / {:.4g} s", r.step_time_s.p10,
                                r.step_time_s.p50, r.step_time_s.p90);
  if (r.days) out += fmt::format("; run {:.3g} / {:.3g} / {:.3g} days", r.days->p10, r.days->p50, r.days->p90);
  out += "\n  from: GPU-to-GPU spread (the slowest of " + std::to_string(r.gpus) + ")";
  out += r.residual_group.empty() ? "; no validated group for this stack, so no model error is included"
                                  : fmt::format(" and the {} rows of validation group {}", r.residual_rows, r.residual_group);
  if (r.deadline_probability) out += fmt::format("\n  P(finish by the deadline) {:.0f}%", 100.0 * *r.deadline_probability);
  if (r.budget_probability) out += fmt::format("\n  P(cost within the budget) {:.0f}%", 100.0 * *r.budget_probability);
  return out + "\n";
}

}  // namespace dtsim::results
