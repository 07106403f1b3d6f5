// The analytical replay when a device's collectives progress on the cores its compute uses
// (ReplayInput::comm_core_share > 0, CPU devices): a compute task holds its remaining work and
// runs at the rate its GPU has left, 1 - share while any collective that GPU takes part in is in
// flight, else 1. Collectives keep their prices; only compute stretches.
#include <algorithm>
#include <map>
#include <queue>
#include <set>
#include <tuple>
#include <unordered_map>

#include "sim/network/collectives.hpp"
#include "sim/replay/dispatch.hpp"
#include "sim/replay/replay.hpp"

namespace dtsim::replay {

namespace {

// Compute on a GPU's own stream shares its cores; the data loader runs beside it, and PCIe copies
// on copy engines (as in SimGrid, where they are flows or timers).
bool shares(const taskgraph::Task& t) {
  return !t.is_collective && t.category != taskgraph::Category::Input && t.category != taskgraph::Category::Copy;
}

class SharedCores {
 public:
  explicit SharedCores(const ReplayInput& in) : in_(in), g_(in.graph), slowed_(1.0 - in.comm_core_share) {
    const std::size_t n = g_.tasks.size();
    out_.backend = "analytical";
    out_.network_model = "per-collective fair share, no contention between collectives";
    out_.start.assign(n, 0.0);
    out_.end.assign(n, 0.0);
    members_.resize(n);
    prog_.resize(n);
  }

  Timeline run() {
    Dispatcher dispatch(g_, in_.reuse);
    auto start = [this](std::size_t i) { start_task(i); };
    // A compute task's predicted end holds what is left of it at its current rate.
    if (in_.reuse) in_.reuse->follow(now_, out_);
    dispatch.begin(start);
    while (!events_.empty()) {
      const auto [t, i, version] = events_.top();
      events_.pop();
      if (version != prog_[i].version) continue;  // re-timed since
      now_ = t;
      const auto& task = g_.tasks[i];
      if (task.is_collective)
        for (int gpu : members_[i]) change(gpu, -1);
      else if (shares(task))
        running_[task.rank].erase(i);
      dispatch.ended(i, start);
    }
    if (in_.reuse) in_.reuse->extend(out_, false);
    for (double e : out_.end) out_.makespan = std::max(out_.makespan, e);
    return std::move(out_);
  }

 private:
  struct Progress {
    double left = 0, since = 0;  // seconds of work at full rate left, as of `since`
    int version = 0;             // events of older versions are stale
  };
  using Event = std::tuple<double, std::size_t, int>;  // end time, task, version

  // Identical collectives cost the same; TaskGraph keeps each distinct one once, at one address.
  double collective_seconds(const taskgraph::Collective& c) {
    auto [it, fresh] = priced_.try_emplace(&c, 0.0);
    if (fresh) {
      auto lowered = network::lower(in_.platform, c, groups_of(g_, c));
      out_.flows += lowered.flow_count();
      it->second = network::analytical_time(in_.platform, lowered);
    }
    return it->second;
  }

  double rate(int gpu) const {
    auto it = in_flight_.find(gpu);
    return it != in_flight_.end() && it->second > 0 ? slowed_ : 1.0;
  }

  // A GPU's count of collectives changes by `delta`: its running compute moves to the new rate.
  void change(int gpu, int delta) {
    const double before = rate(gpu);
    in_flight_[gpu] += delta;
    const double after = rate(gpu);
    auto it = running_.find(gpu);
    if (before == after || it == running_.end()) return;
    for (std::size_t i : it->second) {
      auto& p = prog_[i];
      p.left = std::max(0.0, p.left - (now_ - p.since) * before);
      p.since = now_;
      out_.end[i] = now_ + p.left / after;
      events_.emplace(out_.end[i], i, ++p.version);
    }
  }

  void start_task(std::size_t i) {
    const auto& t = g_.tasks[i];
    out_.start[i] = now_;
    if (t.is_collective) {
      out_.end[i] = now_ + collective_seconds(t.collective());
      events_.emplace(out_.end[i], i, 0);
      std::set<int> gpus;
      if (t.collective().only >= 0) gpus.insert(t.collective().only);
      else
        for (const auto& grp : groups_of(g_, t.collective())) gpus.insert(grp.begin(), grp.end());
      members_[i].assign(gpus.begin(), gpus.end());
      for (int gpu : members_[i]) change(gpu, +1);
    } else if (shares(t)) {
      prog_[i] = {in_.seconds(i), now_, 0};
      running_[t.rank].insert(i);
      out_.end[i] = now_ + prog_[i].left / rate(t.rank);
      events_.emplace(out_.end[i], i, 0);
    } else {
      out_.end[i] = now_ + in_.seconds(i);
      events_.emplace(out_.end[i], i, 0);
    }
  }

  const ReplayInput& in_;
  const taskgraph::TaskGraph& g_;
  const double slowed_;
  Timeline out_;
  std::unordered_map<const taskgraph::Collective*, double> priced_;
  std::map<int, int> in_flight_;                  // GPU -> its collectives in flight
  std::map<int, std::set<std::size_t>> running_;  // GPU -> its compute tasks running
  std::vector<std::vector<int>> members_;         // a running collective's GPUs
  std::vector<Progress> prog_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  double now_ = 0;
};

}  // namespace

Timeline replay_analytical_shared(const ReplayInput& in) { return SharedCores(in).run(); }

}  // namespace dtsim::replay
