#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <tuple>

#include "sim/core/errors.hpp"
#include "sim/results/budget.hpp"
#include "sim/results/closed_form.hpp"
#include "strategies/layout.hpp"
#include "strategies/unit.hpp"

// `dtsim sweep`'s budget (budget.hpp): every candidate priced as the sweep will price it.
namespace dtsim::results {

using config::Backend;
using taskgraph::CollectiveOp;

namespace {
// The sweep's closed form (closed_form.hpp) per strategy: its layout, passes and step, whole
// sweeps of GPT-3 175B taking 0.25 ms a strategy here on 1,024 A100s and 0.7 ms on 16,384, start-up
// included (scripts/bench.sh), counted at 0.5 ms; and one group of its data-parallel collective
// lowered at the analytical flow's cost, for each of three bucket sizes (the first sight of a
// group shape; network::GroupPrices keeps it).
double closed_form_seconds(const config::Scenario& s) {
  const auto& p = s.parallelism;
  const double per_node = std::clamp(std::floor(s.cluster.gpus_per_node / static_cast<double>(p.tensor * p.pipeline)), 1.0,
                                     static_cast<double>(p.data));
  const auto b = network::flow_bound(s.cluster, CollectiveOp::AllReduce, p.algorithm, p.data, 1, per_node);
  return 0.5e-3 + 3 * b.flows * 0.5e-6;
}
// Micro-batches times model chunks of one step: the passes a planner's memory walk may spell out.
double closed_form_passes(const config::Scenario& s) {
  const auto& p = s.parallelism;
  const double chunks = static_cast<double>(p.pipeline) * (p.schedule->chunked ? p.virtual_stages : 1);
  return static_cast<double>(strategies::micro_batches(s.training.global_batch, p.data, p.micro_batch)) * chunks;
}
constexpr double kClosedFormPasses = 1 << 20;
}  // namespace

void check_sweep_budget(const config::Scenario& base, const std::vector<strategies::ParallelismSpec>& candidates,
                        const std::string& gpus_flag) {
  check_sweep_budget(std::vector<SweepGroup>{{base, candidates, {}}}, gpus_flag);
}

void check_sweep_budget(const std::vector<SweepGroup>& groups, const std::string& gpus_flag, int confirm) {
  double seconds = 0, bytes = 0, gpus = 0;
  std::size_t count = 0;
  std::map<std::tuple<const SweepGroup*, int, bool, int, int>, SliceFacts> facts;
  std::vector<double> replays;  // what replaying each candidate the closed form prices would take
  for (const auto& g : groups) {
    for (std::size_t i = 0; i < g.candidates.size(); ++i) {
      const auto& p = g.candidates[i];
      config::Scenario s = g.base;
      s.parallelism = p;
      if (i < g.precisions.size()) s.training.precision = g.precisions[i];
      const bool closed = confirm >= 0 && closed_form_gap(s).empty();
      // With nothing confirmed (--confirm 0) a candidate the closed form prices is never
      // replayed: its replay's cost and memory are not counted, and not estimated. Except for
      // plans of over a million passes per step (micro-batches x chunks), which the closed form's
      // layout may walk: they are still counted as a replay, so such inputs are refused as before.
      if (closed && confirm == 0 && closed_form_passes(s) <= kClosedFormPasses) {
        seconds += closed_form_seconds(s);
        continue;
      }
      // Candidates differ in few of the fields the model slice depends on: built once for each.
      auto [it, fresh] = facts.try_emplace(std::make_tuple(&g, p.tensor, p.sequence_parallel, p.expert, p.expert_tensor));
      if (fresh) it->second = slice_facts(s);
      const Estimate e = estimate(s, Backend::Analytical, true, it->second);
      bytes = std::max(bytes, e.bytes);
      if (closed) {
        seconds += closed_form_seconds(s);
        replays.push_back(e.seconds);
      } else {
        seconds += e.seconds;
      }
    }
    count += g.candidates.size();
    gpus = std::max(gpus, static_cast<double>(g.base.cluster.num_gpus()));
  }
  const auto confirmed = std::min(replays.size(), static_cast<std::size_t>(std::max(0, confirm)));
  std::partial_sort(replays.begin(), replays.begin() + static_cast<std::ptrdiff_t>(confirmed), replays.end(), std::greater<>());
  for (std::size_t k = 0; k < confirmed; ++k) seconds += replays[k];
  if (seconds <= kMaxSweepSeconds && bytes <= kMaxBytes) return;
  const std::string file = groups.empty() ? "" : groups.front().base.file;
  throw InputError(gpus_flag.empty() ? file : "", gpus_flag.empty() ? "/cluster/nodes" : gpus_flag,
                   fmt::format("sweeping {} strategies on up to {} GPUs takes about {:.0f} s of simulation (the largest {:.1f} GB), "
                               "over the limits of {:.0f} s and {:.0f} GB; fewer GPUs would",
                               count, with_commas(gpus), seconds, bytes / 1e9, kMaxSweepSeconds, kMaxBytes / 1e9));
}

}  // namespace dtsim::results
