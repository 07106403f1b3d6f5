#pragma once
// A prediction as a range: P10/P50/P90 of the step time and of the whole run, from stated sources
// of spread, and the chance of meeting a deadline or a budget (issue 27 item 4).
// - device spread: GPUs of one model differ; a synchronous step waits for the slowest of N, whose
//   quantiles are closed form: each GPU's time factor ~ Normal(1, sigma), so
//   P(max <= x) = Phi((x - 1) / sigma)^N.
// - the validation residual of the scenario's stack: the measured / predicted step-time ratios of
//   its group in `dtsim validate --suite` (hardware_profiles/stacks/validation_residuals.json),
//   each row equally likely. Those runs already waited for their slowest GPUs, so with residuals
//   the device spread widens the range about its median rather than shifting it again. A stack
//   without a validated group gets the device spread alone, shift included, and the range says so.
// Failures and checkpoints enter the run's length as their expected cost (capacity.hpp), not as
// spread.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dtsim::results {

struct Result;

struct Quantiles {
  double p10 = 0, p50 = 0, p90 = 0;
};

struct ResidualGroup {
  std::string group;
  std::vector<std::string> stacks, frameworks, model_kinds;  // frameworks, model_kinds empty: any
  std::vector<double> ratios;                   // measured / predicted
};

struct Spread {
  double device_sigma = 0;  // relative
  std::string device_source;
  std::vector<ResidualGroup> groups;
};

// The shipped spread sources (read once from the data folder).
const Spread& shipped_spread();
const ResidualGroup* residual_group(const Spread& s, const std::string& stack, const std::string& framework,
                                    const std::string& model_kind);

// Quantile q of T = point x R x D: R uniform over `ratios` (empty: 1), D the slowest of `gpus`
// GPUs' time factors.
double step_quantile(double point, const std::vector<double>& ratios, double sigma, int gpus, double q);
// P(T <= t).
double step_probability(double point, const std::vector<double>& ratios, double sigma, int gpus, double t);

struct RangeReport {
  Quantiles step_time_s;
  std::optional<Quantiles> days, cost_usd;
  std::optional<double> deadline_probability, budget_probability;
  std::string residual_group;  // "" when the stack has none
  int residual_rows = 0;
  double device_sigma = 0;
  int gpus = 0;
};

RangeReport range_report(const Result& r, const Spread& s = shipped_spread());
nlohmann::ordered_json range_json(const RangeReport& r);
std::string range_text(const RangeReport& r);

}  // namespace dtsim::results
