#include <algorithm>
#include <map>
#include <queue>
#include <set>
#include <tuple>

#include "sim/network/collectives.hpp"
#include "sim/replay/replay.hpp"

namespace dtsim::replay {

// Events in time order; a task starts when its dependencies have ended and, in a stream, when the
// stream is free and it has the lowest priority of those waiting.
Timeline replay_analytical(const ReplayInput& in) {
  const auto& g = in.graph;
  const std::size_t n = g.tasks.size();
  Timeline out;
  out.backend = "analytical";
  out.network_model = "per-collective fair share, no contention between collectives";
  out.start.assign(n, 0.0);
  out.end.assign(n, 0.0);
  std::map<std::tuple<int, int, std::vector<int>, double, int, double>, double> priced;  // identical collectives cost the same
  auto duration = [&](std::size_t i) {
    const auto& t = g.tasks[i];
    if (!t.is_collective) return in.seconds(i);
    const auto& c = t.collective;
    auto key = std::make_tuple(static_cast<int>(c.op), static_cast<int>(c.algorithm), c.groups, c.bytes, c.only,
                               c.server_apply_factor);
    auto it = priced.find(key);
    if (it == priced.end()) {
      auto lowered = network::lower(in.platform, c, groups_of(g, c));
      out.flows += lowered.flow_count();
      it = priced.emplace(key, network::analytical_time(in.platform, lowered)).first;
    }
    return it->second;
  };

  std::vector<int> waiting(n, 0), quorum_left(n, 0);
  std::vector<std::vector<int>> successors(n), quorum_successors(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto& t = g.tasks[i];
    quorum_left[i] = t.any_deps.empty() ? 0 : std::min<int>(t.quorum, static_cast<int>(t.any_deps.size()));
    waiting[i] = static_cast<int>(t.deps.size()) + quorum_left[i];
    for (int d : t.deps) successors[static_cast<std::size_t>(d)].push_back(static_cast<int>(i));
    for (int d : t.any_deps) quorum_successors[static_cast<std::size_t>(d)].push_back(static_cast<int>(i));
  }
  using Event = std::pair<double, std::size_t>;  // end time, task: ties end in graph order
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events;
  std::map<int, bool> busy;
  std::map<int, std::set<std::pair<double, std::size_t>>> queued;  // per stream: priority, task
  double now = 0;
  auto begin = [&](std::size_t i) {
    out.start[i] = now;
    out.end[i] = now + duration(i);
    events.emplace(out.end[i], i);
  };
  auto ready = [&](std::size_t i) {
    const int s = g.tasks[i].stream;
    if (s < 0) return begin(i);
    if (busy[s]) {
      queued[s].emplace(g.tasks[i].priority, i);
      return;
    }
    busy[s] = true;
    begin(i);
  };
  for (std::size_t i = 0; i < n; ++i)
    if (waiting[i] == 0) ready(i);
  while (!events.empty()) {
    const auto [t, i] = events.top();
    events.pop();
    now = t;
    if (const int s = g.tasks[i].stream; s >= 0) {
      busy[s] = false;
      if (auto& q = queued[s]; !q.empty()) {
        const std::size_t next = q.begin()->second;
        q.erase(q.begin());
        busy[s] = true;
        begin(next);
      }
    }
    for (int s : successors[i])
      if (--waiting[static_cast<std::size_t>(s)] == 0) ready(static_cast<std::size_t>(s));
    for (int s : quorum_successors[i]) {
      const auto k = static_cast<std::size_t>(s);
      if (quorum_left[k] > 0 && (--quorum_left[k], --waiting[k] == 0)) ready(k);
    }
  }
  for (std::size_t i = 0; i < n; ++i) out.makespan = std::max(out.makespan, out.end[i]);
  return out;
}

}  // namespace dtsim::replay
