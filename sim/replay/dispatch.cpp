#include "sim/replay/dispatch.hpp"

#include <algorithm>

namespace dtsim::replay {

Dispatcher::Dispatcher(const taskgraph::TaskGraph& g, StepReuse* reuse) : g_(g), reuse_(reuse) {
  const std::size_t n = g.tasks.size();
  waiting_.assign(n, 0);
  quorum_left_.assign(n, 0);
  // Flat successor lists: one allocation each instead of one per task (repeated steps make
  // hundreds of thousands of tasks).
  succ_from_.assign(n + 1, 0);
  quorum_from_.assign(n + 1, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const auto& t = g.tasks[i];
    quorum_left_[i] = t.any_deps.empty() ? 0 : std::min<int>(t.quorum, static_cast<int>(t.any_deps.size()));
    waiting_[i] = static_cast<int>(t.deps.size()) + quorum_left_[i];
    for (int d : t.deps) ++succ_from_[static_cast<std::size_t>(d) + 1];
    for (int d : t.any_deps) ++quorum_from_[static_cast<std::size_t>(d) + 1];
  }
  for (std::size_t i = 0; i < n; ++i) {
    succ_from_[i + 1] += succ_from_[i];
    quorum_from_[i + 1] += quorum_from_[i];
  }
  succ_.resize(succ_from_[n]);
  quorum_succ_.resize(quorum_from_[n]);
  std::vector<std::size_t> fill(succ_from_.begin(), succ_from_.end() - 1), qfill(quorum_from_.begin(), quorum_from_.end() - 1);
  for (std::size_t i = 0; i < n; ++i) {  // in task order, as the lists were filled before
    for (int d : g.tasks[i].deps) succ_[fill[static_cast<std::size_t>(d)]++] = static_cast<int>(i);
    for (int d : g.tasks[i].any_deps) quorum_succ_[qfill[static_cast<std::size_t>(d)]++] = static_cast<int>(i);
  }
}

CollectiveKey collective_key(const taskgraph::Collective& c) {
  return {static_cast<int>(c.op), static_cast<int>(c.algorithm), c.groups, c.bytes, c.only, c.server_apply_factor, c.launch_s};
}

}  // namespace dtsim::replay
