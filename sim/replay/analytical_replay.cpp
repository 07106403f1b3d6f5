#include <algorithm>
#include <map>
#include <queue>
#include <unordered_map>

#include "sim/network/collectives.hpp"
#include "sim/replay/dispatch.hpp"
#include "sim/replay/replay.hpp"

namespace dtsim::replay {

// Events in time order; each task lasts its own price, whatever else runs.
Timeline replay_analytical(const ReplayInput& in) {
  if (in.comm_core_share > 0) return replay_analytical_shared(in);
  const auto& g = in.graph;
  const std::size_t n = g.tasks.size();
  Timeline out;
  out.backend = "analytical";
  out.network_model = "per-collective fair share, no contention between collectives";
  out.start.assign(n, 0.0);
  out.end.assign(n, 0.0);
  // Identical collectives cost the same; TaskGraph keeps each distinct one once, at one address.
  std::unordered_map<const taskgraph::Collective*, double> priced;
  std::vector<double> copied(in.step_tasks, -1.0);  // step 0's collectives, for their later copies
  auto duration = [&](std::size_t i) {
    const auto& t = g.tasks[i];
    if (!t.is_collective) return in.seconds(i);
    double* first = in.step_tasks > 0 ? &copied[i % in.step_tasks] : nullptr;
    if (first && *first >= 0) return *first;
    auto [it, fresh] = priced.try_emplace(&t.collective(), 0.0);
    if (fresh) {
      auto lowered = network::lower(in.platform, t.collective(), groups_of(g, t.collective()));
      out.flows += lowered.flow_count();
      it->second = network::analytical_time(in.platform, lowered);
    }
    if (first) *first = it->second;
    return it->second;
  };

  using Event = std::pair<double, std::size_t>;  // end time, task: ties end in graph order
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events;
  double now = 0;
  auto start = [&](std::size_t i) {
    out.start[i] = now;
    out.end[i] = now + duration(i);
    events.emplace(out.end[i], i);
  };
  Dispatcher dispatch(g, in.reuse);
  if (in.reuse) in.reuse->follow(now, out);
  dispatch.begin(start);
  while (!events.empty()) {
    const auto [t, i] = events.top();
    events.pop();
    now = t;
    dispatch.ended(i, start);
  }
  if (in.reuse) in.reuse->extend(out, false);
  for (double e : out.end) out.makespan = std::max(out.makespan, e);
  return out;
}

}  // namespace dtsim::replay
