#include <algorithm>
#include <map>
#include <tuple>

#include "sim/network/collectives.hpp"
#include "sim/replay/replay.hpp"

namespace dtsim::replay {

Timeline replay_analytical(const ReplayInput& in) {
  const auto& g = in.graph;
  Timeline out;
  out.backend = "analytical";
  out.network_model = "per-collective fair share, no contention between collectives";
  out.start.resize(g.tasks.size());
  out.end.resize(g.tasks.size());
  std::map<std::tuple<int, int, std::vector<int>, double, int>, double> priced;  // identical collectives cost the same
  for (std::size_t i = 0; i < g.tasks.size(); ++i) {
    const auto& t = g.tasks[i];
    double start = 0;
    for (int d : t.deps) start = std::max(start, out.end[static_cast<std::size_t>(d)]);
    if (!t.any_deps.empty() && t.quorum > 0) {  // the quorum-th earliest of these
      std::vector<double> ends;
      for (int d : t.any_deps) ends.push_back(out.end[static_cast<std::size_t>(d)]);
      std::sort(ends.begin(), ends.end());
      start = std::max(start, ends[static_cast<std::size_t>(std::min<int>(t.quorum, static_cast<int>(ends.size())) - 1)]);
    }
    double duration = 0;
    if (!t.is_collective) {
      duration = in.seconds(i);
    } else {
      const auto& c = t.collective;
      auto key = std::make_tuple(static_cast<int>(c.op), static_cast<int>(c.algorithm), c.groups, c.bytes, c.only);
      auto it = priced.find(key);
      if (it == priced.end()) {
        auto lowered = network::lower(in.platform, c, groups_of(g, c));
        out.flows += lowered.flow_count();
        it = priced.emplace(key, network::analytical_time(in.platform, lowered)).first;
      }
      duration = it->second;
    }
    out.start[i] = start;
    out.end[i] = start + duration;
    out.makespan = std::max(out.makespan, out.end[i]);
  }
  return out;
}

}  // namespace dtsim::replay
