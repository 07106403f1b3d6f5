// The analytical replay's price of a lowered collective: each phase as long as its slowest flow
// at its route's most loaded link, plus the phase's latency; and the same as lines against a
// factor on the bytes, for pricing one lowering at many sizes.
#include "sim/network/collectives.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "sim/network/algorithms.hpp"

namespace dtsim::network {

namespace {

// Per-thread buffers of walk(): `load` has a slot per link direction and is all zeros between
// walks (only the slots a phase loaded are cleared after it), so a collective's price costs what
// its flows touch, not the platform's size.
struct WalkScratch {
  std::vector<double> load;  // bytes per link direction: 2l up, 2l+1 down
  std::vector<std::size_t> touched;
  std::vector<Hop> hops;                  // one flow's route
  algorithms::RoutedFlows routed;         // the phase's flows, routed here
  std::vector<std::pair<int, int>> ends;  // every flow's endpoints, to look their routes up
  std::vector<double> busy, latency;
};

// The flows of `ph` routed (algorithms::RoutedFlows): here, or found among those remembered for
// the same flows (algorithms::RememberHops: a shape's collectives at other sizes have the same).
const algorithms::RoutedFlows& routes(const Platform& pf, const Phase& ph, WalkScratch& w) {
  auto route = [&] {
    auto& r = w.routed;
    r.slots.clear();
    r.bandwidth.clear();
    r.latency.clear();
    r.start.assign(1, 0);
    for (const auto& f : ph.flows) {
      w.hops.clear();
      pf.append_route(f.src, f.dst, w.hops);
      double latency = 0;
      for (const Hop& h : w.hops) {
        const auto& link = pf.links()[static_cast<std::size_t>(h.link)];
        r.slots.push_back(static_cast<std::size_t>(h.link) * 2 + (h.up ? 0 : 1));
        r.bandwidth.push_back(link.bandwidth);
        latency += link.latency;
      }
      r.latency.push_back(latency);
      r.start.push_back(r.slots.size());
    }
  };
  algorithms::HopChecks* known = algorithms::RememberHops::current();
  if (!known) {
    route();
    return w.routed;
  }
  w.ends.clear();
  for (const auto& f : ph.flows) w.ends.emplace_back(f.src, f.dst);
  if (const auto it = known->routes.find(w.ends); it != known->routes.end()) return it->second;
  route();
  if (known->hops + w.routed.slots.size() > algorithms::HopChecks::kMaxHops) return w.routed;
  known->hops += w.routed.slots.size();
  return known->routes.emplace(w.ends, w.routed).first->second;
}

// Each flow of `ph`: its time at its route's most loaded link
// (w.busy), and its latency (w.latency); a chain runs at its slowest hop's pace and pays its
// longest hop latency once.
void flow_times(const Platform& pf, const Phase& ph, WalkScratch& w) {
  if (w.load.size() < pf.links().size() * 2) w.load.resize(pf.links().size() * 2, 0.0);
  auto& load = w.load;
  const algorithms::RoutedFlows& r = routes(pf, ph, w);
  const std::size_t n = ph.flows.size();
  for (std::size_t i = 0; i < n; ++i) {
    const double bytes = ph.flows[i].bytes;
    for (std::size_t k = r.start[i]; k < r.start[i + 1]; ++k) {
      const std::size_t s = r.slots[k];
      if (load[s] == 0.0) w.touched.push_back(s);
      load[s] += bytes;
    }
  }
  w.busy.assign(n, 0.0);
  w.latency.assign(r.latency.begin(), r.latency.end());
  auto& busy = w.busy;
  auto& latency = w.latency;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t k = r.start[i]; k < r.start[i + 1]; ++k) busy[i] = std::max(busy[i], load[r.slots[k]] / r.bandwidth[k]);
  for (std::size_t k : w.touched) load[k] = 0.0;
  w.touched.clear();
  for (const auto& c : ph.chains) {
    double slowest = 0, longest = 0;
    for (std::size_t i = c.first; i < c.first + c.count; ++i) {
      slowest = std::max(slowest, busy[i]);
      longest = std::max(longest, latency[i]);
    }
    for (std::size_t i = c.first; i < c.first + c.count; ++i) {
      busy[i] = slowest;
      latency[i] = longest;
    }
  }
}

// The collective's time, and, where asked, with no bytes at all
// (its latencies and host work alone), in one walk over its flows.
double walk(const Platform& pf, const LoweredCollective& lc, double* no_bytes) {
  thread_local WalkScratch w;
  double total = 0, fixed = 0;
  for (const auto& ph : lc.phases) {
    flow_times(pf, ph, w);
    double worst = 0, worst_fixed = 0;
    for (std::size_t i = 0; i < ph.flows.size(); ++i) {
      worst = std::max(worst, w.busy[i] + w.latency[i]);
      worst_fixed = std::max(worst_fixed, w.latency[i]);
    }
    std::map<int, double> queued;  // CPU work queued on each server
    for (const auto& wk : ph.work) {
      const double q = queued[wk.endpoint] += wk.seconds;
      worst = std::max(worst, q);
      worst_fixed = std::max(worst_fixed, q);
    }
    total += worst + ph.latency;
    fixed += worst_fixed + ph.latency;
  }
  if (no_bytes) *no_bytes = fixed;
  return total;
}

}  // namespace

double analytical_time(const Platform& pf, const LoweredCollective& lc) { return walk(pf, lc, nullptr); }

double analytical_times(const Platform& pf, const LoweredCollective& lc, double& no_bytes) {
  return walk(pf, lc, &no_bytes);
}

double TimeLines::at(double factor) const {
  double total = 0;
  for (const auto& ph : phases) {
    double worst = 0;
    for (const auto& [per, fixed] : ph.lines) worst = std::max(worst, per * factor + fixed);
    total += worst + ph.latency;
  }
  return total;
}

std::optional<TimeLines> time_lines(const Platform& pf, const LoweredCollective& lc) {
  thread_local WalkScratch w;
  TimeLines out;
  for (const auto& ph : lc.phases) {
    if (!ph.work.empty()) return std::nullopt;
    flow_times(pf, ph, w);
    auto& kept = out.phases.emplace_back().lines;
    out.phases.back().latency = ph.latency;
    // A line no steeper and no higher than another is never above it (at factors >= 0). Most
    // collectives' flows are alike: where the steepest (highest of those) is also the highest of
    // all, it is the whole envelope.
    std::pair<double, double> top{0, 0};
    double highest = 0;
    for (std::size_t i = 0; i < ph.flows.size(); ++i) {
      top = std::max(top, std::pair{w.busy[i], w.latency[i]});
      highest = std::max(highest, w.latency[i]);
    }
    if (!ph.flows.empty() && top.second == highest) {
      kept.push_back(top);
      continue;
    }
    thread_local std::vector<std::pair<double, double>> all;
    all.clear();
    for (std::size_t i = 0; i < ph.flows.size(); ++i) all.emplace_back(w.busy[i], w.latency[i]);
    std::sort(all.begin(), all.end(), std::greater<>());
    for (const auto& l : all)
      if (kept.empty() || l.second > kept.back().second) kept.push_back(l);
  }
  return out;
}

}  // namespace dtsim::network
