#include "sim/sweep/search.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <set>
#include <thread>

#include "sim/core/errors.hpp"
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

// Every candidate of every cluster; the same strategy on the same cluster and device once. The
// sweep's budget is checked on all of them together before any is priced, as they will be priced
// (`confirm` < 0: every one replayed).
std::vector<Candidate> enumerate_all(const std::vector<Cluster>& clusters, const std::vector<strategies::Precision>& precisions,
                                     const std::string& gpus_flag, int confirm, std::size_t& duplicates) {
  std::vector<Candidate> cands;
  std::vector<results::SweepGroup> groups;
  std::set<std::string> seen;
  for (std::size_t ci = 0; ci < clusters.size(); ++ci) {
    results::SweepGroup g{clusters[ci].base, {}};
    for (auto& c : enumerate(clusters[ci].base, precisions)) {
      const auto& p = c.p;
      const std::string key = fmt::format("{}x{} {} {} s{} v{}", clusters[ci].base.cluster.nodes, clusters[ci].base.cluster.gpus_per_node,
                                          clusters[ci].device, describe(p, c.precision), static_cast<int>(p.schedule), p.virtual_stages);
      if (!seen.insert(key).second) {
        ++duplicates;
        continue;
      }
      c.cluster = ci;
      g.candidates.push_back(c.p);
      g.precisions.push_back(c.precision);
      cands.push_back(std::move(c));
    }
    groups.push_back(std::move(g));
  }
  results::check_sweep_budget(groups, gpus_flag, confirm);
  return cands;
}

// The scenario a candidate stands for: its cluster's, with its strategy and precision.
config::Scenario scenario_of(const std::vector<Cluster>& clusters, const Candidate& c) {
  config::Scenario s = clusters[c.cluster].base;
  s.parallelism = c.p;
  s.training.precision = c.precision;
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
  c.valid = true;
  c.error.clear();
}

// Prices candidates: in closed form, or by the analytical replay on `jobs` threads at once.
class Pricer {
 public:
  Pricer(const std::vector<Cluster>& clusters, std::vector<Candidate>& cands, int jobs, Progress& progress)
      : clusters_(clusters), cands_(cands), jobs_(jobs), progress_(progress) {}

  void price(Candidate& c, results::ClosedForm* closed) const {
    const config::Scenario s = scenario_of(clusters_, c);
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
      // One closed form per cluster and precision: its kernel prices follow the dtype.
      std::map<std::pair<std::size_t, strategies::Precision>, std::unique_ptr<results::ClosedForm>> closed;
      for (std::size_t i = 0; i < cands_.size(); ++i) {
        auto& c = cands_[i];
        const config::Scenario s = scenario_of(clusters_, c);
        const std::string gap = exact ? "--exact" : results::closed_form_gap(s);
        if (!gap.empty()) {
          ++unknown[gap];
          to_replay.push_back(i);
          continue;
        }
        auto& cf = closed[{c.cluster, c.precision}];
        if (!cf) cf = std::make_unique<results::ClosedForm>(s);
        price(c, cf.get());
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

  double key(const Candidate& c) const {
    if (rank_by == "cost") return out.has_length ? c.cost : out.gpus_of(c) * c.step * c.price;
    if (rank_by == "throughput-per-gpu") return -c.samples_per_s / out.gpus_of(c);
    return out.has_length ? c.time_to_train : c.step;
  }

  // The candidates that could be simulated, those that fit first, then by key.
  std::vector<std::size_t> order(const std::vector<Candidate>& cands) const {
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < cands.size(); ++i)
      if (cands[i].valid) order.push_back(i);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
      const auto &a = cands[x], &b = cands[y];
      if (a.fits != b.fits) return a.fits;
      return key(a) < key(b);
    });
    return order;
  }
};

// The best `confirm` of the ranking are replayed and ranked again, until the first `confirm`
// rows are all replayed. Returns how many were replayed to confirm.
std::size_t confirm_best(const Ranking& ranking, Pricer& pricer, std::vector<Candidate>& cands, int confirm) {
  std::size_t confirmed = 0;
  for (;;) {
    std::vector<std::size_t> top_estimates;
    const auto order = ranking.order(cands);
    for (std::size_t r = 0; r < order.size() && r < static_cast<std::size_t>(confirm); ++r)
      if (!cands[order[r]].replayed) top_estimates.push_back(order[r]);
    if (top_estimates.empty()) break;
    for (auto i : top_estimates) cands[i].estimate = cands[i].step;
    pricer.replay_all(top_estimates, false);
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

Outcome search(const std::string& path, const SearchOptions& o) {
  Outcome out;
  out.scenario = config::load_scenario(path);
  const auto precisions = parse_precisions(o.precisions, out.scenario.training.precision);
  const std::vector<int> gpu_list = o.gpus.empty() ? std::vector<int>{0} : parse_gpus(o.gpus);
  out.devices = load_devices(out.scenario, o.devices);
  out.clusters = make_clusters(out.scenario, gpu_list, out.devices, !o.devices.empty());
  out.candidates = enumerate_all(out.clusters, precisions, o.gpus.empty() ? "" : "--gpus", o.exact ? -1 : o.confirm, out.duplicates);

  Progress progress(o.progress || ::isatty(2), out.candidates.size());
  const int jobs = o.jobs > 0 ? o.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  Pricer pricer(out.clusters, out.candidates, jobs, progress);
  out.replayed = pricer.price_all(o.exact, out.replayed_because);
  out.closed_form = out.candidates.size() - out.replayed;

  out.has_length = out.scenario.steps > 0;
  const Ranking ranking{out, o.rank_by};
  out.confirmed = confirm_best(ranking, pricer, out.candidates, o.confirm);
  summarise(out, ranking);
  return out;
}

}  // namespace dtsim::sweep
