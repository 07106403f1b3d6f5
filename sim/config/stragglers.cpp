#include "sim/config/stragglers.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "strategies/placement.hpp"

namespace dtsim::config {

using units::Dimension;

namespace {

constexpr std::size_t kMaxListed = 1024;  // throttles, flapping links

// Fewer blocks for the pipeline stages that hold slow GPUs (a stage runs at its slowest GPU's pace).
void rebalance_stages(Reader& r, Scenario& s) {
  auto& p = s.parallelism;
  if (p.pipeline < 2) r.fail("rebalance_stages", "needs pipeline parallelism (parallelism.pipeline > 1)");
  if (!p.stage_blocks.empty()) r.fail("rebalance_stages", "parallelism.stage_layers already fixes the split");
  if (p.virtual_stages > 1)
    r.fail("rebalance_stages", "rebalancing virtual stages is not modelled: give parallelism.stage_layers, one count per model chunk");
  std::vector<double> slowdown(static_cast<std::size_t>(p.pipeline), 1.0);
  for (const auto& [gpu, slow] : s.stragglers.slow_gpus) {
    // The stage of GPU t + T (st + P d), or t + T (d + D st) with the pipeline outermost (Placement).
    const int inner = p.tensor * p.context;  // context ranks sit next to tensor ranks
    const int st = p.pipeline_outer ? gpu / inner / p.data : gpu / inner % p.pipeline;
    slowdown[static_cast<std::size_t>(st)] = std::max(slowdown[static_cast<std::size_t>(st)], slow);
  }
  p.stage_blocks = strategies::balance_stages(static_cast<int>(s.model.blocks()), slowdown);
}

void parse_jitter(Reader& j, faults::StragglerSpec& sp) {
  const std::string d = j.choice("distribution", {"exponential", "lognormal", "empirical"});
  if (d == "exponential") {
    sp.jitter = faults::Jitter::Exponential;
    sp.mean = j.number("mean", Range{0.0, 100.0, true});
  } else if (d == "lognormal") {
    sp.jitter = faults::Jitter::Lognormal;
    sp.sigma = j.number("sigma", Range{0.0, 10.0, true});
  } else {
    sp.jitter = faults::Jitter::Empirical;
    const Json& v = j.raw("values");
    if (!v.is_array() || v.empty()) j.fail("values", "expected a non-empty list of slowdown multipliers");
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_number() || !(v[i].get<double>() > 0) || v[i].get<double>() > 1000)
        j.fail("values", fmt::format("entry {} must be a multiplier > 0 and <= 1000", i));
      sp.values.push_back(v[i].get<double>());
    }
  }
  j.finish();
}

void parse_slow_gpus(Reader& st, Scenario& s, const std::shared_ptr<Origins>& origins) {
  auto& sp = s.stragglers;
  const Json& v = st.raw("slow_gpus");
  if (!v.is_array()) st.fail("slow_gpus", "expected a list of {\"gpu\": N, \"slowdown\": X}");
  if (static_cast<std::int64_t>(v.size()) > s.cluster.num_gpus())
    st.fail("slow_gpus", fmt::format("{} entries for {} GPUs", v.size(), s.cluster.num_gpus()));
  for (std::size_t i = 0; i < v.size(); ++i) {
    Reader e(v[i], st.pointer("slow_gpus") + "/" + std::to_string(i), origins);
    const int gpu = static_cast<int>(e.integer("gpu", 0, s.cluster.num_gpus() - 1));
    sp.slow_gpus.emplace_back(gpu, e.number("slowdown", Range{0.0, 1000.0, true}));
    e.finish();
  }
}

}  // namespace

void parse_stragglers(Reader& st, Scenario& s, const std::shared_ptr<Origins>& origins) {
  auto& sp = s.stragglers;
  sp.enabled = true;
  sp.seed = static_cast<std::uint64_t>(st.integer("seed", 0, std::int64_t{1} << 53, 1));
  if (auto j = st.optional_object("jitter")) parse_jitter(*j, sp);
  if (st.has("slow_gpus")) parse_slow_gpus(st, s, origins);
  auto list = [&](const char* key, auto&& one) {
    if (!st.has(key)) return;
    const Json& v = st.raw(key);
    if (!v.is_array()) st.fail(key, "expected a list of objects");
    // Each becomes a SimGrid profile and is checked against the others.
    if (v.size() > kMaxListed) st.fail(key, fmt::format("{} entries are more than the {} modelled", v.size(), kMaxListed));
    for (std::size_t i = 0; i < v.size(); ++i) {
      Reader e(v[i], st.pointer(key) + "/" + std::to_string(i), origins);
      one(e);
      e.finish();
    }
  };
  list("throttles", [&](Reader& e) {
    faults::StragglerSpec::Throttle t;
    t.gpu = static_cast<int>(e.integer("gpu", 0, s.cluster.num_gpus() - 1));
    t.start_s = e.quantity("start", Dimension::Time, Range{0.0, 1e9});
    t.duration_s = e.quantity("duration", Dimension::Time, Range{0.0, 1e9, true});
    t.slowdown = e.number("slowdown", Range{1.0, 1000.0});
    for (const auto& o : sp.throttles)
      if (o.gpu == t.gpu && t.start_s < o.start_s + o.duration_s && o.start_s < t.start_s + t.duration_s)
        e.fail_here(fmt::format("overlaps another throttle of GPU {}", t.gpu));
    sp.throttles.push_back(t);
  });
  list("flapping_links", [&](Reader& e) {
    faults::StragglerSpec::Flap f;
    f.gpu = static_cast<int>(e.integer("gpu", 0, s.cluster.num_gpus() - 1));
    // At least 1 ms: SimGrid replays two bandwidth changes per period.
    f.period_s = e.quantity("period", Dimension::Time, Range{1e-3, 1e9});
    f.degraded_s = e.quantity("degraded", Dimension::Time, Range{0.0, 1e9, true});
    if (f.degraded_s >= f.period_s) e.fail("degraded_s", "must be shorter than period_s");
    f.bandwidth_fraction = e.number("bandwidth_fraction", Range{0.0, 1.0, true}, 1.0);
    f.degraded_latency_s = e.quantity("degraded_latency", Dimension::Time, Range{0.0, 1.0}, -1.0);
    if (f.bandwidth_fraction == 1.0 && f.degraded_latency_s < 0)
      e.fail_here("give bandwidth_fraction below 1, degraded_latency_us, or both");
    // The flap belongs to the GPU's NIC, which the node's GPUs may share.
    const auto& c = s.cluster;
    auto nic = [&](int g) { return std::pair{g / c.gpus_per_node, (g % c.gpus_per_node) * c.nics_per_node / c.gpus_per_node}; };
    for (const auto& o : sp.flapping_links)
      if (nic(o.gpu) == nic(f.gpu)) e.fail_here(fmt::format("GPU {} uses the same NIC as GPU {}, already flapping", f.gpu, o.gpu));
    sp.flapping_links.push_back(f);
  });
  if (st.boolean("rebalance_stages", false)) rebalance_stages(st, s);
  s.parallelism.backup_workers = static_cast<int>(st.integer("backup_workers", 0, s.parallelism.data - 1, 0));
  if (s.parallelism.backup_workers > 0 && s.parallelism.updates != strategies::Updates::Sync)
    st.fail("backup_workers", "backup workers drop late gradients from a synchronous step; these updates are asynchronous");
  if (s.parallelism.backup_workers > 0 && s.parallelism.zero_stage > 0)
    st.fail("backup_workers", "dropping late gradients needs replicated optimizer state (zero_stage 0)");
  st.finish();
  s.parallelism.all_replicas = true;
}

}  // namespace dtsim::config
