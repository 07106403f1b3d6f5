#include "sim/replay/replay.hpp"

namespace dtsim::replay {

Breakdown critical_path_breakdown(const taskgraph::TaskGraph& g, const Timeline& t) {
  Breakdown b;
  if (g.tasks.empty()) return b;
  std::size_t cur = 0;
  for (std::size_t i = 0; i < g.tasks.size(); ++i)
    if (t.end[i] >= t.end[cur]) cur = i;
  while (true) {
    const auto& task = g.tasks[cur];
    double span = t.end[cur] - t.start[cur];
    switch (task.category) {
      case taskgraph::Category::Compute: b.compute += span; break;
      case taskgraph::Category::Optimizer: b.optimizer += span; break;
      case taskgraph::Category::Communication: b.exposed_communication += span; break;
    }
    // The predecessor that finished last is the one this task waited for.
    int prev = -1;
    for (int d : task.deps)
      if (prev < 0 || t.end[static_cast<std::size_t>(d)] > t.end[static_cast<std::size_t>(prev)]) prev = d;
    double ready = prev < 0 ? 0.0 : t.end[static_cast<std::size_t>(prev)];
    // A task that started later than its inputs were ready waited on a shared resource.
    b.straggler_wait += std::max(0.0, t.start[cur] - ready);
    if (prev < 0) break;
    cur = static_cast<std::size_t>(prev);
  }
  return b;
}

}  // namespace dtsim::replay
