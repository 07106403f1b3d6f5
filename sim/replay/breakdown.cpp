#include <algorithm>
#include <map>

#include "sim/replay/replay.hpp"

namespace dtsim::replay {

std::vector<std::vector<int>> groups_of(const taskgraph::TaskGraph& g, const taskgraph::Collective& c) {
  std::vector<std::vector<int>> out;
  out.reserve(c.groups.size());
  for (int id : c.groups) out.push_back(g.groups[static_cast<std::size_t>(id)]);
  return out;
}

namespace {

// A stage-to-stage transfer, or the tensor group's gather right after one.
bool from_other_stage(const taskgraph::TaskGraph& g, const taskgraph::Task& task) {
  if (!task.is_collective) return false;
  if (task.collective.op == taskgraph::CollectiveOp::SendRecv) return true;
  return task.collective.op == taskgraph::CollectiveOp::AllGather && task.deps.size() == 1 &&
         g.tasks[static_cast<std::size_t>(task.deps[0])].is_collective &&
         g.tasks[static_cast<std::size_t>(task.deps[0])].collective.op == taskgraph::CollectiveOp::SendRecv;
}

// What a wait for task `d` is charged to.
double* charge_for(const taskgraph::TaskGraph& g, std::size_t d, int rank, Breakdown& b) {
  const auto& task = g.tasks[d];
  if (task.category == taskgraph::Category::Input) return &b.input_stall;
  if (task.is_collective) return from_other_stage(g, task) ? &b.pipeline_bubble : &b.exposed_communication;
  return task.rank == rank ? &b.straggler_wait : &b.pipeline_bubble;
}

// When the last other GPU's compute feeding collective `c` ended, following the chain of collectives
// it queues behind (bucket after bucket): how long `rank` waited for slower GPUs, not the network.
double others_ready(const taskgraph::TaskGraph& g, const Timeline& t, std::size_t c, int rank,
                    std::map<std::size_t, double>& memo) {
  if (auto it = memo.find(c); it != memo.end()) return it->second;
  double ready = 0;
  for (int d : g.tasks[c].deps) {
    const auto k = static_cast<std::size_t>(d);
    const auto& w = g.tasks[k];
    if (w.is_collective) ready = std::max(ready, others_ready(g, t, k, rank, memo));
    else if (w.category != taskgraph::Category::Input && w.rank != rank) ready = std::max(ready, t.end[k]);
  }
  return memo[c] = ready;
}

}  // namespace

Breakdown step_breakdown(const taskgraph::TaskGraph& g, const Timeline& t, const std::vector<double>& work_seconds,
                         const std::vector<double>& work_comm_seconds) {
  Breakdown b;
  if (g.tasks.empty()) return b;
  // The GPU whose stream ends last.
  std::size_t last = g.tasks.size();
  for (std::size_t i = 0; i < g.tasks.size(); ++i)
    if (!g.tasks[i].is_collective && g.tasks[i].category != taskgraph::Category::Input &&
        (last == g.tasks.size() || t.end[i] > t.end[last]))
      last = i;
  if (last == g.tasks.size()) {  // only collectives
    b.exposed_communication = t.makespan;
    return b;
  }
  b.rank = g.tasks[last].rank;
  std::vector<std::size_t> mine;  // the GPU's own stream; its loader runs beside it
  for (std::size_t i = 0; i < g.tasks.size(); ++i)
    if (!g.tasks[i].is_collective && g.tasks[i].rank == b.rank && g.tasks[i].category != taskgraph::Category::Input)
      mine.push_back(i);
  // Ties in start time keep graph order, which follows the stream (an instant task before the
  // pass that waits for it).
  std::sort(mine.begin(), mine.end(), [&](std::size_t x, std::size_t y) { return t.start[x] != t.start[y] ? t.start[x] < t.start[y] : x < y; });

  std::map<std::size_t, double> memo;
  double now = 0;
  for (std::size_t i : mine) {
    const auto& task = g.tasks[i];
    if (t.start[i] > now) {
      std::size_t waited = i;
      for (int d : task.deps)
        if (waited == i || t.end[static_cast<std::size_t>(d)] > t.end[waited]) waited = static_cast<std::size_t>(d);
      const auto& w = g.tasks[waited];
      if (waited != i && w.is_collective && !from_other_stage(g, w)) {
        // Until slower GPUs' compute reached the collective (or the collectives it queues behind)
        // it waited for them; the rest of the wait is for the network.
        const double late = std::clamp(others_ready(g, t, waited, b.rank, memo) - now, 0.0, t.start[i] - now);
        b.straggler_wait += late;
        b.exposed_communication += t.start[i] - now - late;
      } else {
        double* where = waited == i ? &b.straggler_wait : charge_for(g, waited, b.rank, b);
        *where += t.start[i] - now;
      }
    }
    double span = t.end[i] - std::max(t.start[i], now);
    if (task.category == taskgraph::Category::Optimizer) {
      b.optimizer += span;
    } else if (task.category == taskgraph::Category::Communication) {  // e.g. compression kernels
      b.exposed_communication += span;
    } else {
      const auto w = static_cast<std::size_t>(task.work);
      double comm = work_seconds[w] > 0 ? span * work_comm_seconds[w] / work_seconds[w] : 0.0;
      b.exposed_communication += comm;
      b.compute += span - comm;
    }
    now = std::max(now, t.end[i]);
  }
  if (t.makespan > now) {
    // The step ends with something this GPU did not run: whatever finished last.
    std::size_t final_task = 0;
    for (std::size_t i = 0; i < g.tasks.size(); ++i)
      if (t.end[i] >= t.end[final_task]) final_task = i;
    *charge_for(g, final_task, b.rank, b) += t.makespan - now;
  }
  return b;
}

}  // namespace dtsim::replay
