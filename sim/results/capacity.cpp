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

struct Shape {
  int tensor, pipeline, data;
};

// Tensor sizes the model and a node allow, as the scenario loader checks them.
bool tensor_ok(const models::ModelSpec& m, int t) { return m.tensor_split_error(t).empty(); }

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

std::optional<Fit> fewest_gpus_that_fit(const config::Scenario& s, int max_gpus) {
  const auto& m = s.model;
  const auto& p0 = s.parallelism;
  const std::int64_t gbs = s.training.global_batch, mb = p0.micro_batch;
  const bool sync = p0.updates == strategies::Updates::Sync;
  const int v = p0.schedule == strategies::Schedule::Interleaved ? p0.virtual_stages : 1;
  // Expert parallelism stays the scenario's: its groups are carved out of the data-parallel GPUs,
  // so the data size must be a multiple of it.
  const int E = p0.expert;
  std::vector<Shape> shapes;
  // Tensor parallelism within a node: the scenario's, or an 8-GPU NVLink node (DGX/HGX) when its
  // nodes are smaller, since the question is which cluster to get.
  const int node = std::max(s.cluster.gpus_per_node, 8);
  for (int t = 1; t <= node && t <= max_gpus; t *= 2) {
    if (!tensor_ok(m, t) || (!sync && t > 1)) continue;
    for (int pp = 1; static_cast<std::int64_t>(pp) * v <= m.blocks() && t * pp <= max_gpus; ++pp) {
      if (!sync && pp > 1) break;
      for (int d = 1; static_cast<std::int64_t>(t) * pp * d <= max_gpus; ++d) {
        if (gbs % (d * mb) != 0 || d % E != 0) continue;
        const std::int64_t micro = gbs / (d * mb);
        if (v > 1 && micro % pp != 0) continue;
        shapes.push_back({t, pp, d});
      }
    }
  }
  // Fewest GPUs first; among equals the simplest: less pipeline, then less tensor parallelism.
  std::sort(shapes.begin(), shapes.end(), [](const Shape& a, const Shape& b) {
    return std::make_tuple(a.tensor * a.pipeline * a.data, a.pipeline, a.tensor) <
           std::make_tuple(b.tensor * b.pipeline * b.data, b.pipeline, b.tensor);
  });
  std::vector<strategies::Recompute> recomputes{p0.recompute};
  if (p0.recompute != strategies::Recompute::Full) recomputes.push_back(strategies::Recompute::Full);
  std::map<int, models::ModelGraph> graphs;  // by tensor size
  std::map<std::pair<int, int>, std::vector<double>> stage_experts;  // (tensor, pipeline) -> expert params per stage
  std::map<std::tuple<int, int, int, std::int64_t>, std::vector<strategies::MemoryBreakdown>> stage_plans;
  const double wbytes = strategies::weight_bytes_per_param(s.training.precision);
  const double capacity = s.device.memory_bytes;

  // The real plan for a candidate, to confirm what the shortcut below estimated.
  auto full_peak = [&](const Shape& sh, int zero, strategies::Recompute rc) {
    strategies::ParallelismSpec p = p0;
    p.tensor = sh.tensor, p.pipeline = sh.pipeline, p.data = sh.data, p.zero_stage = zero, p.recompute = rc;
    p.context = 1;  // the search tries data, tensor and pipeline shapes only
    p.stage_blocks.clear();
    p.sequence_parallel = p0.sequence_parallel && sh.tensor > 1;
    const auto plan = strategies::plan_training(graphs.at(sh.tensor), p, s.training, s.host);
    return plan.memory.peak() + s.reserved_bytes;
  };

  models::BuildOptions whole{mb, strategies::activation_bytes(s.training.precision), s.training.attention, 1, false};
  const double total_params = m.build(whole).params();
  for (const auto& sh : shapes) {
    // Model states spread evenly over every GPU are a lower bound: skip shapes below it unplanned.
    auto spread = strategies::model_state_memory(total_params, s.training.precision, s.training.optimizer, 3,
                                                 sh.tensor * sh.pipeline * sh.data);
    if (p0.offload_optimizer) spread.optimizer = 0;
    if (spread.peak() + s.reserved_bytes > capacity) continue;
    if (!graphs.contains(sh.tensor)) {
      models::BuildOptions opts{mb, strategies::activation_bytes(s.training.precision), s.training.attention, sh.tensor,
                                p0.sequence_parallel && sh.tensor > 1};
      opts.fp8 = s.training.precision == strategies::Precision::Fp8;
      opts.fp8_current_scaling = s.training.fp8_current_scaling;
      opts.expert = E;
      graphs.emplace(sh.tensor, m.build(opts));
    }
    const auto& g = graphs.at(sh.tensor);
    double largest = 0;  // ZeRO-3 holds a gathered layer and the next one's prefetch
    for (const auto& l : g.layers) largest = std::max(largest, l.params());
    const std::int64_t micro = gbs / (sh.data * mb);
    // Each stage's expert parameters (this GPU's experts), which ZeRO shards over data / expert
    // GPUs instead of data (strategies/plan_experts.cpp).
    auto& experts = stage_experts[{sh.tensor, sh.pipeline}];
    if (experts.empty()) {
      experts.assign(static_cast<std::size_t>(sh.pipeline), 0.0);
      if (E > 1) {
        const auto chunks = strategies::split_chunks(g, sh.pipeline * v, {});
        for (std::size_t j = 0; j < chunks.size(); ++j)
          for (const auto* l : chunks[j]) experts[j % static_cast<std::size_t>(sh.pipeline)] += l->expert_params();
      }
    }
    for (auto rc : recomputes) {
      // One data-parallel replica with enough micro-batches to fill the schedule stands for all
      // of them: activations follow the schedule, model states are divided by ZeRO below.
      strategies::ParallelismSpec p = p0;
      // Under expert parallelism the smallest data size that holds an expert-parallel group.
      p.tensor = sh.tensor, p.pipeline = sh.pipeline, p.data = E, p.zero_stage = 0, p.recompute = rc;
      p.context = 1;
      p.stage_blocks.clear();
      p.sequence_parallel = p0.sequence_parallel && sh.tensor > 1;
      p.priority_buckets = false;
      const std::int64_t fill = 2LL * sh.pipeline * v;
      const std::int64_t m_eff = p.schedule == strategies::Schedule::GPipe ? micro : std::min(micro, fill);
      strategies::TrainingSpec t = s.training;
      t.global_batch = m_eff * mb * E;
      // Data parallelism changes only the micro-batches per replica, and those only up to m_eff:
      // one plan serves every data size with the same tensor, pipeline, recompute and m_eff.
      const auto key = std::make_tuple(sh.tensor, sh.pipeline, static_cast<int>(rc), m_eff);
      if (!stage_plans.contains(key)) {
        try {
          stage_plans[key] = strategies::plan_training(g, p, t, s.host).stage_memory;
        } catch (const std::exception&) {
          stage_plans[key] = {};  // a shape the planner does not model
        }
      }
      const auto& stages = stage_plans[key];
      if (stages.empty()) continue;
      for (int zero = 0; zero <= 3; ++zero) {
        if (zero > 0 && sh.data == 1) break;  // nothing to shard over
        if (zero == 3 && sh.pipeline > 1) break;  // not modelled
        double peak = 0;
        for (std::size_t si = 0; si < stages.size(); ++si) {
          const auto& st = stages[si];
          const double ex = experts[si];
          auto mem = strategies::model_state_memory(st.params / wbytes - ex, s.training.precision, s.training.optimizer, zero,
                                                    sh.data);
          const auto em = strategies::model_state_memory(ex, s.training.precision, s.training.optimizer, zero, sh.data / E);
          mem.params += em.params, mem.gradients += em.gradients, mem.optimizer += em.optimizer;
          if (p0.offload_optimizer) mem.optimizer = 0;
          mem.activations = st.activations;
          mem.other = st.other + (zero == 3 ? 2.0 * largest * wbytes : 0.0);
          peak = std::max(peak, mem.peak());
        }
        peak += s.reserved_bytes;
        if (peak > capacity) continue;
        double real = 0;
        try {
          real = full_peak(sh, zero, rc);
        } catch (const std::exception&) {
          continue;
        }
        if (real > capacity) continue;
        return Fit{sh.tensor * sh.pipeline * sh.data, sh.data, sh.tensor, sh.pipeline, zero, rc, real, E};
      }
    }
  }
  return std::nullopt;
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
    }
  }
  return j;
}

std::string plan_text(const Result& r) {
  std::string out;
  if (r.capacity) {
    const auto& c = *r.capacity;
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
    } else {
      out += "\nfewest GPUs that fit: none up to 65536 GPUs with this micro-batch and global batch\n";
    }
  }
  return out;
}

}  // namespace dtsim::results
