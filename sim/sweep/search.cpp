#include "sim/sweep/search.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <set>
#include <thread>
#include <tuple>

#include "sim/config/tensor_fusion_inputs.hpp"
#include "sim/core/errors.hpp"
#include "sim/results/torus_layout.hpp"
#include "sim/results/budget.hpp"
#include "sim/results/capacity.hpp"
#include "sim/results/closed_form.hpp"
#include "sim/results/result.hpp"
#include "sim/sweep/progress.hpp"

namespace dtsim::sweep {

namespace {

using Devices = std::vector<std::pair<std::string, cost::DeviceProfile>>;

// --devices' profiles in the order given, repeats dropped; none given: the scenario's device.
Devices load_devices(const config::Scenario& scenario, const std::string& list) {
  Devices devices;
  if (list.empty()) devices.emplace_back(device_stem(scenario.device), scenario.device);
  else
    for (const auto& name : split_list(list, "--devices")) {
      if (std::any_of(devices.begin(), devices.end(), [&](const auto& d) { return d.first == name; })) continue;
      try {
        devices.emplace_back(name, config::load_device_profile(name));
      } catch (const InputError& e) {
        throw InputError("", "--devices", e.reason());
      }
    }
  return devices;
}

// Each GPU count on each device, replayed as sweeps replay: analytically, one step, no stragglers.
std::vector<Cluster> make_clusters(const config::Scenario& scenario, const std::vector<int>& gpu_list,
                                   const Devices& devices, bool devices_given) {
  std::vector<Cluster> clusters;
  for (int g : gpu_list)
    for (const auto& [name, profile] : devices) {
      Cluster c;
      c.gpus = g;
      c.device = name;
      c.base = on_cluster(scenario, g, devices_given ? &profile : nullptr);
      c.gpus = c.base.cluster.num_gpus();
      c.base.backend = config::Backend::Analytical;  // SimGrid runs once per process; sweeps use the analytical replay
      c.base.stragglers = {};
      c.base.steps_simulated = 1;
      clusters.push_back(std::move(c));
    }
  return clusters;
}

// Every candidate of every cluster; the same strategy on the same cluster and device once. A
// shard keeps every `shards`-th of them (round robin, so each shard gets every cluster's share).
// The sweep's budget is checked on all that are kept together before any is priced, as they will
// be priced: the closed form for each, the replay for those confirmed (every one under --exact).
std::vector<Candidate> enumerate_all(const std::vector<Cluster>& clusters, const std::vector<strategies::Precision>& precisions,
                                     const SearchOptions& o, bool check_budget, std::size_t& duplicates,
                                     std::size_t& enumerated) {
  std::vector<Candidate> cands;
  std::vector<results::SweepGroup> groups;
  std::set<std::string> seen;
  std::size_t index = 0;
  for (std::size_t ci = 0; ci < clusters.size(); ++ci) {
    results::SweepGroup g{clusters[ci].base, {}, {}};
    for (auto& c : enumerate(clusters[ci].base, precisions)) {
      const auto& p = c.p;
      const std::string key = fmt::format("{}x{} {} {} s{} v{}", clusters[ci].base.cluster.nodes, clusters[ci].base.cluster.gpus_per_node,
                                          clusters[ci].device, describe(c), p.schedule.index(), p.virtual_stages);
      if (!seen.insert(key).second) {
        ++duplicates;
        continue;
      }
      c.index = index++;
      if (o.shards > 0 && c.index % static_cast<std::size_t>(o.shards) != static_cast<std::size_t>(o.shard - 1)) continue;
      c.cluster = ci;
      g.candidates.push_back(c.p);
      g.precisions.push_back(c.precision);
      cands.push_back(std::move(c));
    }
    groups.push_back(std::move(g));
  }
  enumerated = index;
  // --by-cluster confirms each cluster's best: as many replays as clusters times --confirm.
  const int confirm = o.exact ? -1 : o.confirm * (o.by_cluster ? static_cast<int>(clusters.size()) : 1);
  if (check_budget) results::check_sweep_budget(groups, o.gpus.empty() ? "" : "--gpus", confirm);
  return cands;
}

// The scenario a candidate stands for: its cluster's, with its strategy and precision.
config::Scenario scenario_of(const std::vector<Cluster>& clusters, const Candidate& c) {
  config::Scenario s = clusters[c.cluster].base;
  s.parallelism = c.p;
  s.training.precision = c.precision;
  // Horovod's fusion buffers are cut at the gradients' ready times, which the strategy changes.
  if (s.parallelism.fusion.on()) config::price_tensor_fusion(s);
  return s;
}

void fill(Candidate& c, const results::Result& r) {
  c.step = r.step_time_s;
  c.samples_per_s = r.samples_per_s;
  c.mfu = r.mfu;
  c.peak = r.device_peak();  // the allocator's cache included, as `fits` counts it
  c.fits = r.fits;
  const auto plan = r.capacity ? *r.capacity : results::capacity_plan(r);
  c.price = plan.price_per_gpu_hour_usd;
  c.cost_per_million_tokens = plan.cost_per_million_tokens_usd;
  c.time_to_train = plan.time_s;
  c.gpu_hours = plan.gpu_hours;
  c.cost = plan.cost_usd;
  c.energy_kwh = plan.energy_kwh;
  c.capacity = r.capacity_bytes;
  c.valid = true;
  c.error.clear();
}

// Prices candidates: in closed form, or by the analytical replay on `jobs` threads at once.
class Pricer {
 public:
  Pricer(const std::vector<Cluster>& clusters, std::vector<Candidate>& cands, int jobs, Progress& progress)
      : clusters_(clusters), cands_(cands), jobs_(jobs), progress_(progress) {}

  void price(Candidate& c, results::ClosedForm* closed) const { price(c, scenario_of(clusters_, c), closed); }
  // The same with the candidate's scenario made already.
  void price(Candidate& c, const config::Scenario& s, results::ClosedForm* closed) const {
    try {
      if (closed) fill(c, closed->estimate(s));
      else {
        // No fewest-GPUs search for a candidate that does not fit: the sweep's budget has no room for it.
        fill(c, results::simulate(s, false));
        c.replayed = true;
      }
    } catch (const InputError& e) {  // a combination the planner cannot lay out
      c.valid = false;
      c.error = e.pointer().empty() ? e.reason() : e.pointer() + ": " + e.reason();
    } catch (const std::exception& e) {  // out of memory, or a fault of dtsim's: counted, never dropped
      c.valid = false;
      c.error = e.what();
    }
  }

  void replay_all(const std::vector<std::size_t>& which, bool count) {
    std::atomic<std::size_t> next{0};
    std::vector<std::thread> pool;
    for (int j = 0; j < jobs_; ++j)
      pool.emplace_back([&] {
        for (std::size_t i = next++; i < which.size(); i = next++) {
          price(cands_[which[i]], nullptr);
          if (count) progress_.done_one();
        }
      });
    for (auto& t : pool) t.join();
  }

  // Every candidate once: in closed form where it knows the strategy, the rest replayed. Returns
  // how many were replayed; `unknown` counts why.
  std::size_t price_all(bool exact, std::map<std::string, int>& unknown) {
    std::vector<std::size_t> to_replay;
    {
      // One closed form per cluster and precision (its kernel prices follow the dtype) and, on a
      // torus, per order its chips are laid out in for the candidate's tensor groups.
      std::map<std::tuple<std::size_t, strategies::Precision, std::vector<int>>, std::unique_ptr<results::ClosedForm>> closed;
      for (std::size_t i = 0; i < cands_.size(); ++i) {
        auto& c = cands_[i];
        const config::Scenario s = scenario_of(clusters_, c);
        const std::string gap = exact ? "--exact" : results::closed_form_gap(s);
        if (!gap.empty()) {
          ++unknown[gap];
          to_replay.push_back(i);
          continue;
        }
        auto& cf = closed[{c.cluster, c.precision, results::torus_order(s)}];
        if (!cf) cf = std::make_unique<results::ClosedForm>(s);
        price(c, s, cf.get());
        progress_.done_one();
      }
    }
    replay_all(to_replay, true);
    return to_replay.size();
  }

 private:
  const std::vector<Cluster>& clusters_;
  std::vector<Candidate>& cands_;
  const int jobs_;
  Progress& progress_;
};

// What "best" means. Without a training length the whole run's time and cost are unknown, but
// every candidate trains the same global batch per step, so step time and GPU-seconds per step
// (cost per million tokens) rank them the same way the totals would.
struct Ranking {
  const Outcome& out;
  const std::string& rank_by;
  const Limits& limits;

  double key(const Candidate& c) const {
    if (rank_by == "cost") return out.has_length ? c.cost : out.gpus_of(c) * c.step * c.price;
    if (rank_by == "throughput-per-gpu") return -c.samples_per_s / out.gpus_of(c);
    return out.has_length ? c.time_to_train : c.step;
  }

  // The candidates that could be simulated: those within the limits first, then those that fit,
  // then by key; ties in enumeration order (a shard's slice keeps that order).
  std::vector<std::size_t> order(const std::vector<Candidate>& cands) const {
    std::vector<std::size_t> order;
    std::vector<char> ok(cands.size());
    for (std::size_t i = 0; i < cands.size(); ++i)
      if (cands[i].valid) order.push_back(i), ok[i] = within(cands[i], limits);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
      const auto &a = cands[x], &b = cands[y];
      if (ok[x] != ok[y]) return ok[x] > ok[y];
      if (a.fits != b.fits) return a.fits;
      return key(a) < key(b);
    });
    return order;
  }
};

// The best `confirm` of the ranking (of each cluster's, by cluster) are replayed and ranked
// again, until those rows are all replayed. Which candidates that replays depends only on each
// one's two prices, so a shard's confirmations hold every one the whole sweep makes in its slice
// (docs/sweeps.md). Returns how many were replayed to confirm.
std::size_t confirm_best(const Ranking& ranking, const Replay& replay, std::vector<Candidate>& cands, int confirm,
                         bool by_cluster) {
  std::size_t confirmed = 0;
  for (;;) {
    std::vector<std::size_t> top_estimates;
    // Rows seen so far, per cluster (one group unless by cluster).
    std::vector<std::size_t> ranked(by_cluster ? ranking.out.clusters.size() : 1, 0);
    for (auto i : ranking.order(cands))
      if (ranked[by_cluster ? cands[i].cluster : 0]++ < static_cast<std::size_t>(confirm) && !cands[i].replayed)
        top_estimates.push_back(i);
    if (top_estimates.empty()) break;
    for (auto i : top_estimates) cands[i].estimate = cands[i].step;
    replay(top_estimates);
    confirmed += top_estimates.size();
  }
  return confirmed;
}

// The ranked rows, the failures by reason (most common first) and the counts.
void summarise(Outcome& out, const Ranking& ranking) {
  std::map<std::string, int> reasons;
  for (auto i : ranking.order(out.candidates)) out.ranked.push_back(out.candidates[i]);
  for (const auto& c : out.candidates)
    if (!c.valid) ++reasons[c.error.empty() ? "unknown error" : c.error];
  out.failures.assign(reasons.begin(), reasons.end());
  std::stable_sort(out.failures.begin(), out.failures.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  out.failed = out.candidates.size() - out.ranked.size();
  out.fitting = static_cast<std::size_t>(std::count_if(out.ranked.begin(), out.ranked.end(), [](const Candidate& c) { return c.fits; }));
}

}  // namespace

Outcome enumerate_sweep(const std::string& path, const SearchOptions& o, bool check_budget) {
  Outcome out;
  out.scenario = config::load_scenario(path);
  out.has_length = out.scenario.steps > 0;
  if (o.limits.need_length() && !out.has_length)
    throw InputError("", o.limits.max_days > 0 ? "--max-days" : "--max-cost",
                     "needs the run's length: set training.tokens or training.steps in the scenario");
  const auto precisions = parse_precisions(o.precisions, out.scenario.training.precision);
  const std::vector<int> gpu_list = o.gpus.empty() ? std::vector<int>{0} : parse_gpus(o.gpus);
  out.devices = load_devices(out.scenario, o.devices);
  out.clusters = make_clusters(out.scenario, gpu_list, out.devices, !o.devices.empty());
  out.candidates = enumerate_all(out.clusters, precisions, o, check_budget, out.duplicates, out.enumerated);
  return out;
}

void rank(Outcome& out, const SearchOptions& o, const Replay& replay) {
  const Ranking ranking{out, o.rank_by, o.limits};
  out.confirmed = confirm_best(ranking, replay, out.candidates, o.confirm, o.by_cluster);
  summarise(out, ranking);
}

Outcome search(const std::string& path, const SearchOptions& o) {
  Outcome out = enumerate_sweep(path, o, true);
  Progress progress(o.progress || ::isatty(2), out.candidates.size());
  const int jobs = o.jobs > 0 ? o.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  Pricer pricer(out.clusters, out.candidates, jobs, progress);
  out.replayed = pricer.price_all(o.exact, out.replayed_because);
  out.closed_form = out.candidates.size() - out.replayed;
  if (o.shards > 0) out.first_priced = out.candidates;
  rank(out, o, [&](const std::vector<std::size_t>& which) { pricer.replay_all(which, false); });
  return out;
}

}  // namespace dtsim::sweep
