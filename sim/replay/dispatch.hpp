#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "sim/replay/step_reuse.hpp"
#include "sim/taskgraph/task_graph.hpp"

namespace dtsim::replay {

// When each task may start, for both replays: once all its `deps` and the first `quorum` of its
// `any_deps` have ended; and a task of a stream only while the stream runs nothing else, the
// waiting one with the lowest priority going next.
class Dispatcher {
 public:
  explicit Dispatcher(const taskgraph::TaskGraph& g, StepReuse* reuse = nullptr);

  // Calls start(i) for every task ready at the outset.
  template <class Start>
  void begin(Start&& start) {
    for (std::size_t i = 0; i < waiting_.size(); ++i)
      if (waiting_[i] == 0) ready(i, start);
  }

  // Task i has ended: calls start(j) for each task that may start now.
  template <class Start>
  void ended(std::size_t i, Start&& start) {
    if (reuse_) reuse_->ended(i);
    if (const int s = g_.tasks[i].stream; s >= 0) {
      busy_[s] = false;
      if (auto& q = queued_[s]; !q.empty()) {
        const std::size_t next = q.begin()->second;
        q.erase(q.begin());
        busy_[s] = true;
        launch(next, start);
      }
    }
    for (std::uint32_t e = succ_.first[i]; e < succ_.first[i + 1]; ++e) {
      const auto k = static_cast<std::size_t>(succ_.to[e]);
      if (--waiting_[k] == 0) ready(k, start);
    }
    if (quorum_succ_.first.empty()) return;
    for (std::uint32_t e = quorum_succ_.first[i]; e < quorum_succ_.first[i + 1]; ++e) {
      const auto k = static_cast<std::size_t>(quorum_succ_.to[e]);
      if (quorum_left_[k] > 0 && (--quorum_left_[k], --waiting_[k] == 0)) ready(k, start);
    }
  }

 private:
  template <class Start>
  void ready(std::size_t i, Start& start) {
    if (reuse_ && reuse_->ready(i)) return;  // a held step: derived after the replay
    const int s = g_.tasks[i].stream;
    if (s >= 0 && busy_[s]) {
      queued_[s].emplace(g_.tasks[i].priority, i);
      return;
    }
    if (s >= 0) busy_[s] = true;
    launch(i, start);
  }
  template <class Start>
  void launch(std::size_t i, Start& start) {
    if (reuse_) reuse_->started(i);
    start(i);
  }

  const taskgraph::TaskGraph& g_;
  StepReuse* reuse_;
  std::vector<int> waiting_, quorum_left_;
  // Each task's successors, all in one array (task i's from first[i] to first[i + 1]): a vector
  // per task cost 56 bytes a task more, 130 MB at 2.3 million tasks.
  struct Edges {
    std::vector<std::uint32_t> first;
    std::vector<std::int32_t> to;
  };
  Edges succ_, quorum_succ_;
  std::map<int, bool> busy_;
  std::map<int, std::set<std::pair<double, std::size_t>>> queued_;
};

}  // namespace dtsim::replay
