#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

#include "sim/cli/commands.hpp"
#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "sim/core/units.hpp"
#include "sim/results/result.hpp"

namespace dtsim::cli {

namespace {

struct Candidate {
  strategies::ParallelismSpec p;
  double step = 0, samples_per_s = 0, mfu = 0, peak = 0;
  bool fits = false, valid = false;
  std::string error;  // why it could not be simulated
};

std::string describe(const strategies::ParallelismSpec& p) {
  std::string s = fmt::format("tp{} pp{} dp{} mb{}", p.tensor, p.pipeline, p.data, p.micro_batch);
  if (p.pipeline > 1) s += fmt::format(" {}{}", strategies::to_string(p.schedule), p.virtual_stages > 1 ? fmt::format(" v{}", p.virtual_stages) : "");
  if (p.zero_stage) s += fmt::format(" zero{}", p.zero_stage);
  if (p.recompute != strategies::Recompute::None) s += fmt::format(" recompute={}", strategies::to_string(p.recompute));
  if (p.sequence_parallel) s += " sp";
  return s;
}

// Every strategy the scenario's model and cluster allow, within a few choices per knob.
std::vector<Candidate> enumerate(const config::Scenario& s) {
  std::vector<Candidate> out;
  const auto& m = s.model;
  const int gpus = s.cluster.num_gpus();
  for (int tp = 1; tp <= s.cluster.gpus_per_node; tp *= 2) {
    if (!m.tensor_split_error(tp).empty()) continue;
    for (int pp = 1; pp <= std::min<std::int64_t>(64, m.blocks()); pp *= 2) {
      if (gpus % (tp * pp)) continue;
      const int dp = gpus / (tp * pp);
      for (std::int64_t mb : {1, 2, 4, 8}) {
        if (s.training.global_batch % (static_cast<std::int64_t>(dp) * mb)) continue;
        const std::int64_t micro = s.training.global_batch / (static_cast<std::int64_t>(dp) * mb);
        std::vector<std::pair<strategies::Schedule, int>> schedules{{strategies::Schedule::OneFOneB, 1}};
        if (pp > 1 && micro % pp == 0 && m.blocks() % (2 * pp) == 0) schedules.push_back({strategies::Schedule::Interleaved, 2});
        for (auto [sched, v] : schedules)
          for (int zero : {0, 1, 3}) {
            if ((zero > 0 && dp == 1) || (zero == 3 && pp > 1)) continue;
            for (auto rc : {strategies::Recompute::None, strategies::Recompute::Selective, strategies::Recompute::Full}) {
              Candidate c;
              c.p = s.parallelism;
              c.p.tensor = tp;
              c.p.pipeline = pp;
              c.p.data = dp;
              c.p.micro_batch = mb;
              c.p.schedule = sched;
              c.p.virtual_stages = v;
              c.p.zero_stage = zero;
              c.p.recompute = rc;
              c.p.sequence_parallel = tp > 1;
              c.p.all_replicas = false;
              out.push_back(c);
            }
          }
      }
    }
  }
  return out;
}

}  // namespace

int sweep(const SweepOptions& o) {
  config::Scenario base = config::load_scenario(o.scenario);
  if (o.gpus > 0) {
    if (o.gpus % base.cluster.gpus_per_node && o.gpus > base.cluster.gpus_per_node)
      throw InputError("", "--gpus", fmt::format("{} GPUs do not fill nodes of {}", o.gpus, base.cluster.gpus_per_node));
    base.cluster.gpus_per_node = std::min(base.cluster.gpus_per_node, o.gpus);
    base.cluster.nodes = o.gpus / base.cluster.gpus_per_node;
  }
  base.backend = config::Backend::Analytical;  // SimGrid runs once per process; sweeps use the analytical replay
  base.stragglers = {};
  base.steps_simulated = 1;
  auto cands = enumerate(base);
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> pool;
  const int jobs = o.jobs > 0 ? o.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int j = 0; j < jobs; ++j)
    pool.emplace_back([&] {
      for (std::size_t i = next++; i < cands.size(); i = next++) {
        auto& c = cands[i];
        config::Scenario s = base;
        s.parallelism = c.p;
        try {
          auto r = results::simulate(s);
          c.step = r.step_time_s;
          c.samples_per_s = r.samples_per_s;
          c.mfu = r.mfu;
          c.peak = r.memory.peak();
          c.fits = r.fits;
          c.valid = true;
        } catch (const InputError& e) {  // a combination the planner cannot lay out
          c.error = e.pointer().empty() ? e.reason() : e.pointer() + ": " + e.reason();
        } catch (const std::exception& e) {  // out of memory, or a fault of dtsim's: counted, never dropped
          c.error = e.what();
        }
      }
    });
  for (auto& t : pool) t.join();
  std::vector<Candidate> ok;
  std::map<std::string, int> reasons;
  for (const auto& c : cands) {
    if (c.valid) ok.push_back(c);
    else ++reasons[c.error.empty() ? "unknown error" : c.error];
  }
  std::vector<std::pair<std::string, int>> failures(reasons.begin(), reasons.end());
  std::stable_sort(failures.begin(), failures.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  const std::size_t failed = cands.size() - ok.size();
  std::stable_sort(ok.begin(), ok.end(), [](const Candidate& a, const Candidate& b) {
    if (a.fits != b.fits) return a.fits;
    return a.samples_per_s > b.samples_per_s;
  });
  const std::size_t fitting = static_cast<std::size_t>(std::count_if(ok.begin(), ok.end(), [](const Candidate& c) { return c.fits; }));
  // Nothing to recommend: a check the user implicitly asked for failed (exit 3, SPEC.md).
  const int code = fitting == 0 ? 3 : 0;
  const std::string none_fits = fmt::format("no strategy fits in {:.0f} GiB per GPU", base.device.memory_bytes / units::kGiB);
  if (o.format == "json") {
    nlohmann::ordered_json rows = nlohmann::ordered_json::array(), why = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < std::min(ok.size(), static_cast<std::size_t>(o.top)); ++i)
      rows.push_back({{"strategy", describe(ok[i].p)}, {"tensor", ok[i].p.tensor}, {"pipeline", ok[i].p.pipeline},
                      {"data", ok[i].p.data}, {"micro_batch_size", ok[i].p.micro_batch}, {"zero_stage", ok[i].p.zero_stage},
                      {"recompute", strategies::to_string(ok[i].p.recompute)}, {"step_time_s", ok[i].step},
                      {"samples_per_s", ok[i].samples_per_s}, {"mfu", ok[i].mfu}, {"peak_bytes", ok[i].peak},
                      {"fits", ok[i].fits}});
    for (const auto& [reason, n] : failures) why.push_back({{"reason", reason}, {"count", n}});
    std::cout << nlohmann::ordered_json{{"scenario", base.name}, {"gpus", base.cluster.num_gpus()},
                                        {"candidates", cands.size()}, {"evaluated", ok.size()}, {"fitting", fitting},
                                        {"does_not_fit", ok.size() - fitting}, {"failed", failed}, {"failures", why},
                                        {"rows", rows}}.dump(2) << "\n";
    if (code) std::cerr << base.name << ": " << none_fits << "\n";
    return code;
  }
  std::cout << fmt::format("{}: {} strategies on {} GPUs, {} evaluated (analytical replay): {} fit in {:.0f} GiB, {} do not fit, {} failed\n",
                           base.name, cands.size(), base.cluster.num_gpus(), ok.size(), fitting,
                           base.device.memory_bytes / units::kGiB, ok.size() - fitting, failed);
  const std::size_t shown = std::min<std::size_t>(failures.size(), 5);
  for (std::size_t i = 0; i < shown; ++i) std::cout << fmt::format("  {} failed: {}\n", failures[i].second, failures[i].first);
  if (failures.size() > shown) std::cout << fmt::format("  ... and {} other reasons (--format json lists them)\n", failures.size() - shown);
  if (code) std::cout << none_fits << "\n";
  std::cout << "\n";
  std::cout << fmt::format("{:>4}  {:<64} {:>10} {:>11} {:>6} {:>9}\n", "rank", "strategy", "step_s", "samples/s", "MFU", "peak_GiB");
  for (std::size_t i = 0; i < std::min(ok.size(), static_cast<std::size_t>(o.top)); ++i)
    std::cout << fmt::format("{:>4}  {:<64} {:>10.4f} {:>11.1f} {:>5.1f}% {:>8.1f}{}\n", i + 1, describe(ok[i].p), ok[i].step,
                             ok[i].samples_per_s, 100 * ok[i].mfu, ok[i].peak / units::kGiB, ok[i].fits ? "" : "  does not fit");
  return code;
}

}  // namespace dtsim::cli
