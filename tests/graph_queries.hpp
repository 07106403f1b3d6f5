#pragma once
// Questions tests ask of a task graph by label.
#include <string>

#include "sim/taskgraph/task_graph.hpp"

namespace dtsim::test {

// The task labelled `label`; null when there is none.
inline const taskgraph::Task* find_task(const taskgraph::TaskGraph& g, const std::string& label) {
  for (const auto& t : g.tasks)
    if (t.label() == label) return &t;
  return nullptr;
}

// How many collectives of `op` have labels starting with `label_start`.
inline int count_collectives(const taskgraph::TaskGraph& g, taskgraph::CollectiveOp op, const std::string& label_start) {
  int n = 0;
  for (const auto& t : g.tasks)
    if (t.is_collective && t.collective().op == op && t.label().rfind(label_start, 0) == 0) ++n;
  return n;
}

}  // namespace dtsim::test
