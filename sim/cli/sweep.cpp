#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "sim/cli/commands.hpp"
#include "sim/cli/sweep_candidates.hpp"
#include "sim/config/merge.hpp"
#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "sim/core/files.hpp"
#include "sim/core/units.hpp"
#include "sim/results/budget.hpp"
#include "sim/results/capacity.hpp"
#include "sim/results/closed_form.hpp"
#include "sim/results/result.hpp"

namespace dtsim::cli {

namespace {

using namespace sweeping;

// RFC 4180: a field with a comma, quote or line break is quoted, its quotes doubled.
std::string csv_field(const std::string& v) {
  if (v.find_first_of(",\"\r\n") == std::string::npos) return v;
  std::string q = "\"";
  for (char c : v) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

// Progress and ETA on stderr, at most a few times a second; on a terminal one line rewritten.
class Progress {
 public:
  Progress(bool on, std::size_t total) : on_(on), tty_(::isatty(2)), total_(total) {}
  void done_one() {
    if (!on_) return;
    const std::lock_guard<std::mutex> lock(mu_);
    ++done_;
    const double t = elapsed();
    if (done_ < total_ && t - last_ < (tty_ ? 0.2 : 1.0)) return;
    last_ = t;
    const double eta = done_ ? t / static_cast<double>(done_) * static_cast<double>(total_ - done_) : 0;
    std::cerr << fmt::format("{}sweep: {}/{} candidates, {:.1f} s elapsed, ETA {:.1f} s{}", tty_ ? "\r" : "", done_,
                             total_, t, eta, tty_ ? "" : "\n");
    if (tty_ && done_ == total_) std::cerr << "\n";
    std::cerr.flush();
  }

 private:
  double elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }
  bool on_, tty_;
  std::size_t total_, done_ = 0;
  double last_ = -1;
  std::mutex mu_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace

int sweep(const SweepOptions& o) {
  if (!o.write_best.empty()) check_output_path(o.write_best);  // before the work, so a bad path costs nothing
  const config::Scenario scenario = config::load_scenario(o.scenario);
  const auto precisions = parse_precisions(o.precisions, scenario.training.precision);
  const std::vector<int> gpu_list = o.gpus.empty() ? std::vector<int>{0} : parse_gpus(o.gpus);
  std::vector<std::pair<std::string, cost::DeviceProfile>> devices;
  if (o.devices.empty()) devices.emplace_back(device_stem(scenario.device), scenario.device);
  else
    for (const auto& name : split_list(o.devices, "--devices")) {
      if (std::any_of(devices.begin(), devices.end(), [&](const auto& d) { return d.first == name; })) continue;
      try {
        devices.emplace_back(name, config::load_device_profile(name));
      } catch (const InputError& e) {
        throw InputError("", "--devices", e.reason());
      }
    }

  std::vector<Cluster> clusters;
  for (int g : gpu_list)
    for (const auto& [name, profile] : devices) {
      Cluster c;
      c.gpus = g;
      c.device = name;
      c.base = on_cluster(scenario, g, o.devices.empty() ? nullptr : &profile);
      c.gpus = c.base.cluster.num_gpus();
      c.base.backend = config::Backend::Analytical;  // SimGrid runs once per process; sweeps use the analytical replay
      c.base.stragglers = {};
      c.base.steps_simulated = 1;
      clusters.push_back(std::move(c));
    }

  // Every candidate of every cluster; the same strategy on the same cluster and device once.
  std::vector<Candidate> cands;
  std::vector<results::SweepGroup> groups;
  std::set<std::string> seen;
  std::size_t duplicates = 0;
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
      cands.push_back(std::move(c));
    }
    groups.push_back(std::move(g));
  }
  results::check_sweep_budget(groups, o.gpus.empty() ? "" : "--gpus");

  // Each candidate in closed form where it knows the strategy, else by the analytical replay;
  // then the best `confirm` of the ranking are replayed and ranked again, until the first
  // `confirm` rows are all replayed.
  Progress progress(o.progress || ::isatty(2), cands.size());
  auto fill = [&](Candidate& c, const results::Result& r) {
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
  };
  auto price = [&](Candidate& c, results::ClosedForm* closed) {
    config::Scenario s = clusters[c.cluster].base;
    s.parallelism = c.p;
    s.training.precision = c.precision;
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
  };
  const int jobs = o.jobs > 0 ? o.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  auto replay_all = [&](const std::vector<std::size_t>& which, bool count) {
    std::atomic<std::size_t> next{0};
    std::vector<std::thread> pool;
    for (int j = 0; j < jobs; ++j)
      pool.emplace_back([&] {
        for (std::size_t i = next++; i < which.size(); i = next++) {
          price(cands[which[i]], nullptr);
          if (count) progress.done_one();
        }
      });
    for (auto& t : pool) t.join();
  };
  std::map<std::string, int> unknown;  // why the closed form left candidates to the replay
  std::vector<std::size_t> to_replay;
  {
    // One closed form per cluster and precision: its kernel prices follow the dtype.
    std::map<std::pair<std::size_t, strategies::Precision>, std::unique_ptr<results::ClosedForm>> closed;
    for (std::size_t i = 0; i < cands.size(); ++i) {
      auto& c = cands[i];
      config::Scenario s = clusters[c.cluster].base;
      s.parallelism = c.p;
      s.training.precision = c.precision;
      const std::string gap = o.exact ? "--exact" : results::closed_form_gap(s);
      if (!gap.empty()) {
        ++unknown[gap];
        to_replay.push_back(i);
        continue;
      }
      auto& cf = closed[{c.cluster, c.precision}];
      if (!cf) cf = std::make_unique<results::ClosedForm>(s);
      price(c, cf.get());
      progress.done_one();
    }
  }
  replay_all(to_replay, true);
  const std::size_t estimated = cands.size() - to_replay.size();

  // What "best" means. Without a training length the whole run's time and cost are unknown, but
  // every candidate trains the same global batch per step, so step time and GPU-seconds per step
  // (cost per million tokens) rank them the same way the totals would.
  const bool has_length = scenario.steps > 0;
  auto gpus_of = [&](const Candidate& c) { return static_cast<double>(clusters[c.cluster].gpus); };
  auto key = [&](const Candidate& c) {
    if (o.rank_by == "cost") return has_length ? c.cost : gpus_of(c) * c.step * c.price;
    if (o.rank_by == "throughput-per-gpu") return -c.samples_per_s / gpus_of(c);
    return has_length ? c.time_to_train : c.step;
  };
  auto rank = [&] {
    std::vector<std::size_t> order;
    for (std::size_t i = 0; i < cands.size(); ++i)
      if (cands[i].valid) order.push_back(i);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
      const auto &a = cands[x], &b = cands[y];
      if (a.fits != b.fits) return a.fits;
      return key(a) < key(b);
    });
    return order;
  };
  std::size_t confirmed = 0;
  for (;;) {
    std::vector<std::size_t> top_estimates;
    const auto order = rank();
    for (std::size_t r = 0; r < order.size() && r < static_cast<std::size_t>(o.confirm); ++r)
      if (!cands[order[r]].replayed) top_estimates.push_back(order[r]);
    if (top_estimates.empty()) break;
    for (auto i : top_estimates) cands[i].estimate = cands[i].step;
    replay_all(top_estimates, false);
    confirmed += top_estimates.size();
  }
  std::vector<Candidate> ok;
  std::map<std::string, int> reasons;
  for (auto i : rank()) ok.push_back(cands[i]);
  for (const auto& c : cands)
    if (!c.valid) ++reasons[c.error.empty() ? "unknown error" : c.error];
  std::vector<std::pair<std::string, int>> failures(reasons.begin(), reasons.end());
  std::stable_sort(failures.begin(), failures.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  const std::size_t failed = cands.size() - ok.size();

  const std::string ranked =
      o.rank_by == "throughput-per-gpu" ? "samples/s per GPU"
      : o.rank_by == "cost" ? (has_length ? "cost to train" : "cost per million tokens (no training length: set training.tokens or training.steps for the cost to train)")
                            : (has_length ? "time to train" : "step time (no training length: set training.tokens or training.steps for the time to train)");
  const std::size_t fitting = static_cast<std::size_t>(std::count_if(ok.begin(), ok.end(), [](const Candidate& c) { return c.fits; }));
  // Nothing to recommend: a check the user implicitly asked for failed (exit 3, SPEC.md).
  const int code = fitting == 0 ? 3 : 0;
  std::string memories;
  for (const auto& [name, d] : devices)
    memories += fmt::format("{}{:.0f} GiB", memories.empty() ? "" : " or ", d.memory_bytes / units::kGiB);
  const std::string none_fits = fmt::format("no strategy fits in {} per GPU", memories);
  if (fitting && !o.write_best.empty())
    write_file_atomic(o.write_best, best_scenario(o.scenario, clusters[ok[0].cluster], ok[0].p, ok[0].precision));

  const std::size_t top = std::min(ok.size(), static_cast<std::size_t>(o.top));
  auto priced_by = [](const Candidate& c) { return c.replayed ? "replay" : "closed-form"; };
  if (o.format == "csv") {  // every evaluated candidate, best first
    std::cout << "rank,gpus,device,strategy,tensor,pipeline,data,micro_batch_size,pipeline_schedule,virtual_stages,zero_stage,"
                 "recompute,sequence_parallel,step_time_s,samples_per_s,samples_per_s_per_gpu,mfu,peak_bytes,fits,"
                 "price_per_gpu_hour_usd,cost_per_million_tokens_usd,time_to_train_s,gpu_hours,cost_usd,priced_by,context,precision\r\n";
    auto opt = [&](double v) { return has_length ? fmt::format("{}", v) : std::string(); };
    for (std::size_t i = 0; i < ok.size(); ++i) {
      const auto& c = ok[i];
      std::cout << fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\r\n", i + 1,
                               clusters[c.cluster].gpus, csv_field(clusters[c.cluster].device), csv_field(describe(c.p, c.precision)),
                               c.p.tensor, c.p.pipeline, c.p.data, c.p.micro_batch, schedule_key(c.p.schedule),
                               c.p.virtual_stages, c.p.zero_stage, strategies::to_string(c.p.recompute),
                               c.p.sequence_parallel, c.step, c.samples_per_s, c.samples_per_s / gpus_of(c), c.mfu, c.peak,
                               c.fits, c.price, c.cost_per_million_tokens, opt(c.time_to_train), opt(c.gpu_hours), opt(c.cost),
                               priced_by(c), c.p.context, precision_name(c.precision));
    }
    if (code) std::cerr << scenario.name << ": " << none_fits << "\n";
    return code;
  }
  if (o.format == "json") {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array(), why = nlohmann::ordered_json::array(),
                           cl = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < top; ++i) {
      const auto& c = ok[i];
      nlohmann::ordered_json row{{"strategy", describe(c.p, c.precision)}, {"gpus", clusters[c.cluster].gpus}, {"device", clusters[c.cluster].device},
                                 {"tensor", c.p.tensor}, {"pipeline", c.p.pipeline},
                                 {"data", c.p.data}, {"expert", c.p.expert}, {"micro_batch_size", c.p.micro_batch}, {"zero_stage", c.p.zero_stage},
                                 {"recompute", strategies::to_string(c.p.recompute)}, {"step_time_s", c.step},
                                 {"samples_per_s", c.samples_per_s}, {"samples_per_s_per_gpu", c.samples_per_s / gpus_of(c)},
                                 {"mfu", c.mfu}, {"peak_bytes", c.peak}, {"fits", c.fits},
                                 {"price_per_gpu_hour_usd", c.price}, {"cost_per_million_tokens_usd", c.cost_per_million_tokens},
                                 {"priced_by", priced_by(c)},
                                 {"context", c.p.context},
                                 {"precision", precision_name(c.precision)}};
      if (c.estimate > 0) row["closed_form_step_time_s"] = c.estimate;
      if (has_length) {
        row["time_to_train_s"] = c.time_to_train;
        row["gpu_hours"] = c.gpu_hours;
        row["cost_usd"] = c.cost;
      }
      rows.push_back(row);
    }
    for (const auto& [reason, n] : failures) why.push_back({{"reason", reason}, {"count", n}});
    nlohmann::ordered_json replayed_because = nlohmann::ordered_json::array();
    for (const auto& [reason, n] : unknown) replayed_because.push_back({{"reason", reason}, {"count", n}});
    for (const auto& c : clusters) cl.push_back({{"gpus", c.gpus}, {"device", c.device}});
    std::cout << nlohmann::ordered_json{{"scenario", scenario.name}, {"gpus", clusters.front().gpus}, {"clusters", cl},
                                        {"rank_by", o.rank_by}, {"ranked_by", ranked},
                                        {"candidates", cands.size()}, {"duplicates_dropped", duplicates},
                                        {"evaluated", ok.size()}, {"fitting", fitting},
                                        {"does_not_fit", ok.size() - fitting}, {"failed", failed}, {"failures", why},
                                        {"closed_form", estimated}, {"replayed", to_replay.size() + confirmed},
                                        {"confirmed", confirmed}, {"replayed_because", replayed_because},
                                        {"rows", rows}}.dump(2) << "\n";
    if (code) std::cerr << scenario.name << ": " << none_fits << "\n";
    return code;
  }
  const std::string how =
      estimated == 0 ? "analytical replay"
                     : fmt::format("{} ranked in closed form, the best {} confirmed by the analytical replay{}", estimated, confirmed,
                                   to_replay.empty() ? "" : fmt::format(", {} replayed", to_replay.size()));
  std::string where;
  for (const auto& c : clusters) where += fmt::format("{}{} x {}", where.empty() ? "" : ", ", c.gpus, c.device);
  std::cout << fmt::format("{}: {} strategies on {} ({}): {} evaluated, {} fit, {} do not fit, {} failed{}\n",
                           scenario.name, cands.size(), where, how, ok.size(), fitting, ok.size() - fitting, failed,
                           duplicates ? fmt::format(", {} duplicates dropped", duplicates) : "");
  for (const auto& [reason, n] : unknown)
    if (reason != "--exact") std::cout << fmt::format("  {} replayed: the closed form does not know {}\n", n, reason);
  std::cout << "ranked by " << ranked << "\n";
  const std::size_t shown = std::min<std::size_t>(failures.size(), 5);
  for (std::size_t i = 0; i < shown; ++i) std::cout << fmt::format("  {} failed: {}\n", failures[i].second, failures[i].first);
  if (failures.size() > shown) std::cout << fmt::format("  ... and {} other reasons (--format json lists them)\n", failures.size() - shown);
  if (code) std::cout << none_fits << "\n";
  std::cout << "\n";
  const bool multi = clusters.size() > 1;
  std::cout << fmt::format("{:>4}  {}{:<56} {:>10} {:>11} {:>9} {:>6} {:>9} {:>9}{}\n", "rank",
                           multi ? fmt::format("{:>6} {:<14} ", "gpus", "device") : "", "strategy", "step_s", "samples/s",
                           "per_GPU", "MFU", "peak_GiB", "$/Mtok", has_length ? fmt::format(" {:>10} {:>12}", "days", "cost_$") : "");
  for (std::size_t i = 0; i < top; ++i) {
    const auto& c = ok[i];
    std::cout << fmt::format("{:>4}  {}{:<56} {:>10.4f} {:>11.1f} {:>9.2f} {:>5.1f}% {:>9.1f} {:>9.4f}{}{}\n", i + 1,
                             multi ? fmt::format("{:>6} {:<14} ", clusters[c.cluster].gpus, clusters[c.cluster].device) : "",
                             describe(c.p, c.precision), c.step, c.samples_per_s, c.samples_per_s / gpus_of(c), 100 * c.mfu,
                             c.peak / units::kGiB, c.cost_per_million_tokens,
                             has_length ? fmt::format(" {:>10.2f} {:>12.0f}", c.time_to_train / 86400, c.cost) : "",
                             c.fits ? "" : "  does not fit");
  }
  if (fitting && !o.write_best.empty()) std::cout << fmt::format("\nwrote {} (rank 1)\n", o.write_best);
  return code;
}

}  // namespace dtsim::cli
