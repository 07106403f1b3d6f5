#include "sim/replay/dispatch.hpp"

#include <algorithm>

namespace dtsim::replay {

namespace {

// Successors in the order the tasks list them, as the per-task vectors held them: a count, a
// prefix sum, then a fill.
template <class DepsOf>
void invert(const taskgraph::TaskGraph& g, DepsOf deps_of, std::vector<std::uint32_t>& first, std::vector<std::int32_t>& to) {
  const std::size_t n = g.tasks.size();
  first.assign(n + 1, 0);
  for (const auto& t : g.tasks)
    for (int d : deps_of(t)) ++first[static_cast<std::size_t>(d) + 1];
  for (std::size_t i = 0; i < n; ++i) first[i + 1] += first[i];
  to.resize(first[n]);
  std::vector<std::uint32_t> next(first.begin(), first.end() - 1);
  for (std::size_t i = 0; i < n; ++i)
    for (int d : deps_of(g.tasks[i])) to[next[static_cast<std::size_t>(d)]++] = static_cast<std::int32_t>(i);
}

}  // namespace

Dispatcher::Dispatcher(const taskgraph::TaskGraph& g, StepReuse* reuse) : g_(g), reuse_(reuse) {
  const std::size_t n = g.tasks.size();
  waiting_.assign(n, 0);
  const bool quorums = std::any_of(g.tasks.begin(), g.tasks.end(), [](const taskgraph::Task& t) { return !t.any_deps.empty(); });
  if (quorums) quorum_left_.assign(n, 0);  // most graphs have none: no per-task counts for them
  for (std::size_t i = 0; i < n; ++i) {
    const auto& t = g.tasks[i];
    const int quorum = t.any_deps.empty() ? 0 : std::min<int>(t.quorum, static_cast<int>(t.any_deps.size()));
    if (quorums) quorum_left_[i] = quorum;
    waiting_[i] = static_cast<int>(t.deps.size()) + quorum;
  }
  invert(g, [](const taskgraph::Task& t) -> const taskgraph::TaskIds& { return t.deps; }, succ_.first, succ_.to);
  if (quorums)
    invert(g, [](const taskgraph::Task& t) -> const taskgraph::RareTaskIds& { return t.any_deps; }, quorum_succ_.first, quorum_succ_.to);
}

}  // namespace dtsim::replay
