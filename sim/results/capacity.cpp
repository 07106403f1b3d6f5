#include "sim/results/capacity.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "sim/core/units.hpp"
#include "sim/results/result.hpp"

namespace dtsim::results {

namespace {

constexpr double kHour = 3600, kDay = 86400, kYear = 365.25 * kDay;

std::string duration(double s) {
  if (s < 2 * kDay) return fmt::format("{:.1f} hours", s / kHour);
  if (s < kYear) return fmt::format("{:.1f} days", s / kDay);
  return fmt::format("{:.1f} years", s / kYear);
}

std::string dollars(double usd) {
  if (usd >= 1e9) return fmt::format("${:.2f}B", usd / 1e9);
  if (usd >= 1e6) return fmt::format("${:.2f}M", usd / 1e6);
  if (usd >= 1e3) return fmt::format("${:.1f}k", usd / 1e3);
  return fmt::format("${:.2f}", usd);
}

std::string energy(double kwh) {
  if (kwh >= 1e6) return fmt::format("{:.2f} GWh", kwh / 1e6);
  if (kwh >= 1e3) return fmt::format("{:.1f} MWh", kwh / 1e3);
  return fmt::format("{:.1f} kWh", kwh);
}

}  // namespace

CapacityPlan capacity_plan(const Result& r) {
  const auto& s = r.scenario_spec;
  CapacityPlan c;
  c.power_w = s.device.power_w;
  c.price_per_gpu_hour_usd = s.price_per_gpu_hour_usd > 0 ? s.price_per_gpu_hour_usd : s.device.price_per_gpu_hour_usd;
  c.price_from = s.price_per_gpu_hour_usd > 0 ? "scenario" : c.price_per_gpu_hour_usd > 0 ? "device" : "";
  const double tokens_per_step =
      static_cast<double>(s.training.global_batch) * static_cast<double>(s.model.tokens_per_sample());
  // Per million tokens at the simulated throughput, failures left out (none for image models).
  if (r.tokens_per_s > 0) {
    const double seconds_per_million = 1e6 / r.tokens_per_s;
    c.cost_per_million_tokens_usd = r.gpus * seconds_per_million / kHour * c.price_per_gpu_hour_usd;
    c.kwh_per_million_tokens = r.gpus * seconds_per_million / kHour * c.power_w / 1000;
  }
  if (s.steps <= 0) return c;
  c.steps = s.steps;
  c.tokens = static_cast<double>(s.steps) * tokens_per_step;
  c.ideal_time_s = static_cast<double>(s.steps) * r.step_time_s;
  c.with_faults = r.faults.has_value();
  c.time_s = c.with_faults ? r.faults->expected_time_s : c.ideal_time_s;
  // GPUs are held (and paid for, and powered) for the wall time, lost work and restarts included.
  c.gpu_hours = r.gpus * c.time_s / kHour;
  c.energy_kwh = c.gpu_hours * c.power_w / 1000;
  c.cost_usd = c.gpu_hours * c.price_per_gpu_hour_usd;
  return c;
}

nlohmann::ordered_json plan_json(const Result& r) {
  nlohmann::ordered_json j;
  if (r.capacity) {
    const auto& c = *r.capacity;
    if (c.steps > 0) {
      j["steps"] = c.steps;
      j["tokens"] = c.tokens;
      j["time_to_train_s"] = c.time_s;
      j["time_to_train_days"] = c.time_s / kDay;
      j["ideal_time_to_train_s"] = c.ideal_time_s;
      j["includes_failures"] = c.with_faults;
      j["gpu_hours"] = c.gpu_hours;
    }
    j["power_per_gpu_W"] = c.power_w;
    j["power_basis"] = "TDP";
    if (c.steps > 0) j["energy_kWh"] = c.energy_kwh;
    j["kWh_per_million_tokens"] = c.kwh_per_million_tokens;
    if (c.price_per_gpu_hour_usd > 0) {
      j["price_per_gpu_hour_usd"] = c.price_per_gpu_hour_usd;
      j["price_from"] = c.price_from;
      if (c.steps > 0) j["cost_usd"] = c.cost_usd;
      j["cost_per_million_tokens_usd"] = c.cost_per_million_tokens_usd;
    }
  }
  if (!r.fits) {
    if (r.fewest_fit) {
      const auto& f = *r.fewest_fit;
      j["fewest_gpus_that_fit"] = {{"gpus", f.gpus},
                                   {"data", f.data},
                                   {"tensor", f.tensor},
                                   {"pipeline", f.pipeline},
                                   {"zero_stage", f.zero_stage},
                                   {"expert", f.expert},
                                   {"recompute", strategies::to_string(f.recompute)},
                                   {"peak_bytes", static_cast<std::uint64_t>(std::llround(f.peak_bytes))}};
    } else {
      j["fewest_gpus_that_fit"] = nullptr;
      if (!r.fewest_fit_stopped.empty()) j["fewest_gpus_search_stopped"] = r.fewest_fit_stopped;
    }
  }
  return j;
}

std::string plan_text(const Result& r) {
  std::string out;
  if (r.capacity) {
    const auto& c = *r.capacity;
    // The sizing question ("how long on one A100?") still gets its answer, marked as one no run
    // can reach.
    if (!r.fits) out += "\nnot achievable: does not fit; the plan below is what it would take with enough memory";
    const bool priced = c.price_per_gpu_hour_usd > 0;
    if (c.steps > 0) {
      out += fmt::format("\nplan: {} steps ({:.3g} tokens) take {}", c.steps, c.tokens, duration(c.time_s));
      out += c.with_faults ? fmt::format(" with failures and checkpoints ({} without)\n", duration(c.ideal_time_s))
                           : std::string(" (no failures: add \"faults\" for them)\n");
      out += fmt::format("  {:.4g} GPU-hours on {} GPU(s); {} at {:.0f} W TDP per GPU (GPUs only)", c.gpu_hours, r.gpus,
                         energy(c.energy_kwh), c.power_w);
      out += priced ? fmt::format("; {} at ${:.2f} per GPU-hour ({})\n", dollars(c.cost_usd), c.price_per_gpu_hour_usd,
                                  c.price_from == "scenario" ? "training.price_per_gpu_hour_usd" : "device default")
                    : std::string("; no price: set training.price_per_gpu_hour_usd\n");
    } else {
      out += "\nplan: give training.steps or training.tokens for the time to train";
      out += priced ? fmt::format("; {} and {:.3g} kWh per million tokens\n", dollars(c.cost_per_million_tokens_usd),
                                  c.kwh_per_million_tokens)
                    : fmt::format("; {:.3g} kWh per million tokens\n", c.kwh_per_million_tokens);
    }
  }
  if (!r.fits) {
    if (r.fewest_fit) {
      const auto& f = *r.fewest_fit;
      out += fmt::format("\nfewest GPUs that fit: {} (data {} x tensor {} x pipeline {}{}, ZeRO {}, recompute {}): "
                         "{:.1f} of {:.1f} GiB (memory only, not simulated)\n",
                         f.gpus, f.data, f.tensor, f.pipeline, f.expert > 1 ? fmt::format(", expert {}", f.expert) : "",
                         f.zero_stage, strategies::to_string(f.recompute),
                         f.peak_bytes / units::kGiB, r.capacity_bytes / units::kGiB);
    } else if (!r.fewest_fit_stopped.empty()) {
      out += fmt::format("\nfewest GPUs that fit: not found: {}\n", r.fewest_fit_stopped);
    } else {
      out += "\nfewest GPUs that fit: none up to 65536 GPUs with this micro-batch and global batch\n";
    }
  }
  return out;
}

}  // namespace dtsim::results
