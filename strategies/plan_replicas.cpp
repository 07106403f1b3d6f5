// Every data-parallel replica emitted (stragglers, parallelism.all_replicas) where collectives
// spanning replicas run inside the passes: under ZeRO-2 and ZeRO-3 over the data-parallel group
// (each micro-batch's ZeRO-2 reduce-scatter, each layer's ZeRO-3 all-gather and reduce-scatter),
// under expert parallelism over the expert-parallel group (each MoE layer's all-to-alls). Such a
// collective is one operation all the group's members enter: NCCL starts moving bytes only once
// every rank has called it, so a slow member holds up everyone in it. Replicas are emitted one
// after another, so the first replica of the group creates each of these collectives and every
// later one joins the same task at the same point of its passes, adding its own dependencies.
#include <functional>
#include <queue>
#include <stdexcept>

#include "strategies/planner.hpp"

namespace dtsim::strategies {

// Lane 0: the collectives over the data-parallel groups, which replica 0 creates. Lane 1 + b: the
// all-to-alls of expert-parallel group b (replicas b E to b E + E - 1), which its first creates.
int Planner::lane_creator(int lane) const { return lane == 0 ? 0 : (lane - 1) * p_.expert; }

// Each replica's passes start from the state replica 0's started from: its own streams empty.
// Without this the next replica's first collective would wait for the last one of the replica
// before (which it joins: a cycle), and its first forward for the previous replica's ZeRO-3
// end-of-backward synchronisation.
void Planner::start_replica() {
  if (replicas_join()) {
    joined_.clear();
    if (d_ > 0) last_comm_.assign(static_cast<std::size_t>(p_.pipeline), -1);
  }
  for (std::size_t u = 0; u < units_.size(); ++u) attributed(u, [&](Unit& x) { x.start_replica(*this); });
}

int Planner::group_collective(int s, taskgraph::Collective c, std::vector<int> deps, const std::string& label, int lane) {
  if (!replicas_join() || !in_passes_) return plan_.graph.add_collective(std::move(c), label, std::move(deps));
  auto& made = group_collectives_[{s, lane}];
  if (d_ == lane_creator(lane)) {
    const int id = plan_.graph.add_collective(std::move(c), label, std::move(deps));
    made.push_back(id);
    return id;
  }
  const std::size_t k = joined_[{s, lane}]++;
  if (k >= made.size()) throw std::logic_error("replica " + std::to_string(d_) + " emits more group collectives than the one it joins");
  const int id = made[k];
  auto& task = plan_.graph.tasks[static_cast<std::size_t>(id)];
  if (task.label() != label || task.collective().bytes != c.bytes || task.collective().groups != c.groups)
    throw std::logic_error("replica " + std::to_string(d_) + " out of step with the replica it joins at " + label);
  for (int dep : deps) {
    if (dep == id) continue;
    bool known = false;
    for (int have : task.deps) known = known || have == dep;
    if (!known) task.deps.push_back(dep);
  }
  reorder_ = true;
  return id;
}

// A joined collective now waits for tasks created after it: renumber the tasks so that each
// comes after everything it waits for, keeping the emitted order wherever it already did.
void Planner::order_tasks() {
  if (!reorder_) return;
  auto& tasks = plan_.graph.tasks;
  const std::size_t n = tasks.size();
  std::vector<int> waiting(n, 0);
  std::vector<std::vector<int>> after(n);
  auto edge = [&](int d, std::size_t i) {
    after[static_cast<std::size_t>(d)].push_back(static_cast<int>(i));
    ++waiting[i];
  };
  for (std::size_t i = 0; i < n; ++i) {
    for (int d : tasks[i].deps) edge(d, i);
    for (int d : tasks[i].any_deps) edge(d, i);
  }
  std::priority_queue<int, std::vector<int>, std::greater<>> ready;
  for (std::size_t i = 0; i < n; ++i)
    if (waiting[i] == 0) ready.push(static_cast<int>(i));
  std::vector<int> order, new_id(n, -1);
  order.reserve(n);
  while (!ready.empty()) {
    const int i = ready.top();
    ready.pop();
    new_id[static_cast<std::size_t>(i)] = static_cast<int>(order.size());
    order.push_back(i);
    for (int j : after[static_cast<std::size_t>(i)])
      if (--waiting[static_cast<std::size_t>(j)] == 0) ready.push(j);
  }
  if (order.size() != n) throw std::logic_error("joined collectives made the task graph cyclic");
  std::vector<taskgraph::Task> out;
  out.reserve(n);
  for (int i : order) {
    out.push_back(std::move(tasks[static_cast<std::size_t>(i)]));
    auto& t = out.back();
    for (int& d : t.deps) d = new_id[static_cast<std::size_t>(d)];
    for (int& d : t.any_deps) d = new_id[static_cast<std::size_t>(d)];
    for (int& d : t.after_previous_step) d = new_id[static_cast<std::size_t>(d)];
  }
  tasks = std::move(out);
  for (auto& m : plan_.memory_marks) m.task = new_id[static_cast<std::size_t>(m.task)];
}

}  // namespace dtsim::strategies
