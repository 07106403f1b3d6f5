#include "sim/replay/dispatch.hpp"

#include <algorithm>

namespace dtsim::replay {

Dispatcher::Dispatcher(const taskgraph::TaskGraph& g) : g_(g) {
  const std::size_t n = g.tasks.size();
  waiting_.assign(n, 0);
  quorum_left_.assign(n, 0);
  successors_.resize(n);
  quorum_successors_.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto& t = g.tasks[i];
    quorum_left_[i] = t.any_deps.empty() ? 0 : std::min<int>(t.quorum, static_cast<int>(t.any_deps.size()));
    waiting_[i] = static_cast<int>(t.deps.size()) + quorum_left_[i];
    for (int d : t.deps) successors_[static_cast<std::size_t>(d)].push_back(static_cast<int>(i));
    for (int d : t.any_deps) quorum_successors_[static_cast<std::size_t>(d)].push_back(static_cast<int>(i));
  }
}

CollectiveKey collective_key(const taskgraph::Collective& c) {
  return {static_cast<int>(c.op), static_cast<int>(c.algorithm), c.groups, c.bytes, c.only, c.server_apply_factor, c.launch_s};
}

}  // namespace dtsim::replay
