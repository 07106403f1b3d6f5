#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/config/scenario.hpp"

// A capacity plan: a whole training run from one simulated step, and the fewest GPUs whose memory
// holds the model when the scenario's do not.
namespace dtsim::results {

struct Result;

struct CapacityPlan {
  std::int64_t steps = 0;   // 0: the scenario gave no training length
  double tokens = 0;        // steps x global batch x sequence length
  double ideal_time_s = 0;  // steps x step time
  double time_s = 0;        // with failures and checkpoints when `faults` is set, else ideal
  bool with_faults = false;
  double gpu_hours = 0;
  double power_w = 0;  // per GPU: the device's TDP (an upper bound on its draw; host, network, cooling left out)
  double energy_kwh = 0;
  double price_per_gpu_hour_usd = 0;  // 0: no price known
  std::string price_from;             // "scenario" or "device"
  double cost_usd = 0;
  double cost_per_million_tokens_usd = 0, kwh_per_million_tokens = 0;  // at the simulated throughput
};

// Fewest GPUs (data x tensor x pipeline, ZeRO stage, recomputation) whose worst rank fits the device's
// memory, from the memory plan alone (no simulation). Tensor parallelism stays within a node (of 8 GPUs
// at least). Micro-batch, global batch, schedule and expert parallelism stay the scenario's (the
// data size a multiple of the expert-parallel size).
struct Fit {
  int gpus = 0, data = 1, tensor = 1, pipeline = 1, zero_stage = 0;
  strategies::Recompute recompute = strategies::Recompute::None;
  double peak_bytes = 0;
  int expert = 1;
};

CapacityPlan capacity_plan(const Result& r);
// Plans are laid out without their task graphs (strategies::plan_layout: the same memory), so a
// search takes a fraction of a second. Every plan the search makes is priced by the budget
// (budget.hpp) first, as if built; once the next would pass `budget_s` (modelled seconds) or a
// single plan's limits, the search ends without an answer and the report's `stopped` says how
// far it got.
struct FitSearch {
  std::string stopped;       // "" unless the budget ended the search
  double spent_s = 0;        // the budget's estimate of the plans it made
  double planned_tasks = 0;  // the tasks of those plans, as built (none: plans are laid out, not built)
};
std::optional<Fit> fewest_gpus_that_fit(const config::Scenario& s, int max_gpus = 1 << 16, double budget_s = 60,
                                        FitSearch* report = nullptr);

// The result's "plan" block; null when there is nothing to say.
nlohmann::ordered_json plan_json(const Result& r);
// The text summary's lines for it; "" when there is nothing to say.
std::string plan_text(const Result& r);

}  // namespace dtsim::results
