// The analytical replay when a device's collectives progress on the cores its compute uses
// (ReplayInput::comm_core_share > 0, CPU devices): a compute task holds its remaining work and
// runs at the rate its GPU has left, 1 - share while any collective that GPU takes part in is in
// flight, else 1. Collectives keep their prices; only compute stretches.
#include <algorithm>
#include <map>
#include <queue>
#include <set>
#include <tuple>
#include <unordered_map>

#include "sim/network/collectives.hpp"
#include "sim/replay/dispatch.hpp"
#include "sim/replay/replay.hpp"

namespace dtsim::replay {

Timeline replay_analytical_shared(const ReplayInput& in) {
  const auto& g = in.graph;
  const std::size_t n = g.tasks.size();
  Timeline out;
  out.backend = "analytical";
  out.network_model = "per-collective fair share, no contention between collectives";
  out.start.assign(n, 0.0);
  out.end.assign(n, 0.0);
  // Identical collectives cost the same; TaskGraph keeps each distinct one once, at one address.
  std::unordered_map<const taskgraph::Collective*, double> priced;
  auto collective_seconds = [&](const taskgraph::Collective& c) {
    auto [it, fresh] = priced.try_emplace(&c, 0.0);
    if (fresh) {
      auto lowered = network::lower(in.platform, c, groups_of(g, c));
      out.flows += lowered.flow_count();
      it->second = network::analytical_time(in.platform, lowered);
    }
    return it->second;
  };
  // Compute on a GPU's own stream shares its cores; the data loader runs beside it, and PCIe copies
  // on copy engines (as in SimGrid, where they are flows or timers).
  auto shares = [&](const taskgraph::Task& t) {
    return !t.is_collective && t.category != taskgraph::Category::Input && t.category != taskgraph::Category::Copy;
  };
  const double slowed = 1.0 - in.comm_core_share;
  std::map<int, int> in_flight;                  // GPU -> its collectives in flight
  std::map<int, std::set<std::size_t>> running;  // GPU -> its compute tasks running
  std::vector<std::vector<int>> members(n);      // a running collective's GPUs
  struct Progress {
    double left = 0, since = 0;  // seconds of work at full rate left, as of `since`
    int version = 0;             // events of older versions are stale
  };
  std::vector<Progress> prog(n);
  auto rate = [&](int gpu) {
    auto it = in_flight.find(gpu);
    return it != in_flight.end() && it->second > 0 ? slowed : 1.0;
  };

  using Event = std::tuple<double, std::size_t, int>;  // end time, task, version
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events;
  double now = 0;
  // A GPU's count of collectives changes by `delta`: its running compute moves to the new rate.
  auto change = [&](int gpu, int delta) {
    const double before = rate(gpu);
    in_flight[gpu] += delta;
    const double after = rate(gpu);
    auto it = running.find(gpu);
    if (before == after || it == running.end()) return;
    for (std::size_t i : it->second) {
      auto& p = prog[i];
      p.left = std::max(0.0, p.left - (now - p.since) * before);
      p.since = now;
      out.end[i] = now + p.left / after;
      events.emplace(out.end[i], i, ++p.version);
    }
  };
  auto start = [&](std::size_t i) {
    const auto& t = g.tasks[i];
    out.start[i] = now;
    if (t.is_collective) {
      out.end[i] = now + collective_seconds(t.collective());
      events.emplace(out.end[i], i, 0);
      std::set<int> gpus;
      if (t.collective().only >= 0) gpus.insert(t.collective().only);
      else
        for (const auto& grp : groups_of(g, t.collective())) gpus.insert(grp.begin(), grp.end());
      members[i].assign(gpus.begin(), gpus.end());
      for (int gpu : members[i]) change(gpu, +1);
    } else if (shares(t)) {
      prog[i] = {in.seconds(i), now, 0};
      running[t.rank].insert(i);
      out.end[i] = now + prog[i].left / rate(t.rank);
      events.emplace(out.end[i], i, 0);
    } else {
      out.end[i] = now + in.seconds(i);
      events.emplace(out.end[i], i, 0);
    }
  };
  Dispatcher dispatch(g, in.reuse);
  // A compute task's predicted end holds what is left of it at its current rate.
  if (in.reuse) in.reuse->follow(now, out);
  dispatch.begin(start);
  while (!events.empty()) {
    const auto [t, i, version] = events.top();
    events.pop();
    if (version != prog[i].version) continue;  // re-timed since
    now = t;
    const auto& task = g.tasks[i];
    if (task.is_collective)
      for (int gpu : members[i]) change(gpu, -1);
    else if (shares(task))
      running[task.rank].erase(i);
    dispatch.ended(i, start);
  }
  if (in.reuse) in.reuse->extend(out, false);
  for (double e : out.end) out.makespan = std::max(out.makespan, e);
  return out;
}

}  // namespace dtsim::replay
