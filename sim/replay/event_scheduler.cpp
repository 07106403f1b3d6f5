#include "sim/replay/event_scheduler.hpp"

#include <algorithm>
#include <set>
#include <unordered_set>
#include <utility>

namespace dtsim::replay {

EventScheduler::EventScheduler(const ReplayInput& in, PreparedOf prepared)
    : in_(in), g_(in.graph), prepared_(std::move(prepared)), dispatch_(in.graph, in.reuse) {
  const std::size_t n = g_.tasks.size();
  out_.start.assign(n, 0.0);
  out_.end.assign(n, 0.0);
  find_timed_ranks();
  if (in.reuse) {
    in.reuse->clock = [this] { return now(); };
    in.reuse->describe = [this](const std::vector<std::size_t>& running, double now, std::vector<std::vector<double>>& d) {
      describe(running, now, d);
    };
  }
}

void EventScheduler::start() {
  dispatch_.begin([this](std::size_t i) { begin(i); });
}

// What is left of running tasks (StepReuse): start, phase, when it began, flows left, the work
// left in each activity and each pending timer, all relative to now. Max-min sharing without
// TCP effects has no other memory: the rates follow from the activities in flight.
void EventScheduler::describe(const std::vector<std::size_t>& running, double now, std::vector<std::vector<double>>& d) const {
  std::unordered_map<std::size_t, std::vector<double>> left, dates;
  remaining(left);
  for (const auto& [task, date] : timers_) dates[task].push_back(date - now);
  for (std::size_t r = 0; r < running.size(); ++r) {
    const std::size_t i = running[r];
    auto& v = d[r];
    v.push_back(out_.start[i] - now);
    if (auto it = running_.find(i); it != running_.end())
      v.insert(v.end(), {static_cast<double>(it->second.phase), it->second.phase_start - now, static_cast<double>(it->second.flows_left)});
    for (auto* m : {&left, &dates}) {
      auto it = m->find(i);
      v.push_back(it == m->end() ? 0.0 : static_cast<double>(it->second.size()));
      if (it == m->end()) continue;
      std::sort(it->second.begin(), it->second.end());
      v.insert(v.end(), it->second.begin(), it->second.end());
    }
  }
}

// Durations fixed before the replay need no SimGrid activity when nothing can share their
// host: they become timers in SimGrid's timer heap, O(log n) each, instead of Execs, whose
// completion walks the list of every activity in flight (ExecImpl::post in SimGrid 3.32,
// quadratic with every replica simulated). A GPU qualifies when its compute tasks run one
// after another (each lists the previous one among its deps), no server work of a collective
// runs on its host and no throttle changes its speed; elsewhere Execs share the host as before.
// Delays on the clock host (loads, phase latencies) never share: its cores outnumber them.
void EventScheduler::find_timed_ranks() {
  timed_rank_.assign(static_cast<std::size_t>(std::max(0, g_.num_ranks)), 1);
  std::vector<int> previous(timed_rank_.size(), -1);
  for (std::size_t i = 0; i < g_.tasks.size(); ++i) {
    const auto& t = g_.tasks[i];
    if (t.is_collective || t.category == taskgraph::Category::Input || t.category == taskgraph::Category::Copy) continue;
    const auto r = static_cast<std::size_t>(t.rank);
    if (r >= timed_rank_.size()) continue;
    if (previous[r] >= 0 && std::find(t.deps.begin(), t.deps.end(), previous[r]) == t.deps.end()) timed_rank_[r] = 0;
    previous[r] = static_cast<int>(i);
  }
  std::unordered_set<int> shared;  // endpoints where collectives do CPU work
  for (const auto* prep : prepared_.distinct)
    if (prep)
      for (const auto& ph : prep->lowered.phases)
        for (const auto& w : ph.work) shared.insert(w.endpoint);
  if (in_.variability)
    for (const auto& th : in_.variability->throttles) shared.insert(in_.platform.fabric_endpoint(th.gpu));
  if (in_.comm_core_share > 0) timed_rank_.assign(timed_rank_.size(), 0);  // pstates change their speed
  for (std::size_t r = 0; r < timed_rank_.size(); ++r)
    if (shared.count(in_.platform.fabric_endpoint(static_cast<int>(r)))) timed_rank_[r] = 0;
}

void EventScheduler::after(double seconds, std::size_t task, Role r) {
  const double date = now() + seconds;
  timer(date, task, r, in_.reuse ? timers_.emplace(task, date) : timers_.end());
}

void EventScheduler::fired(std::size_t task, Role r, Pending pending) {
  if (in_.reuse) timers_.erase(pending);
  done(task, r);
}

// Starts the current phase's flows, or its closing latency when it has none.
void EventScheduler::start_phase(std::size_t task) {
  auto& run = running_.at(task);
  run.phase_start = now();
  const auto& ph = run.prep->lowered.phases[run.phase];
  const auto& chained = run.prep->chained[run.phase];
  out_.flows += ph.flows.size();
  int& left = run.flows_left;
  left = static_cast<int>(ph.work.size() + ph.chains.size());
  for (char c : chained) left += c ? 0 : 1;
  if (left == 0) after(ph.latency, task, Role::PhaseEnd);
  // A server's CPU work shares its host with the other updates it is applying.
  for (const auto& w : ph.work) exec(task, w.endpoint, w.seconds, Role::Flow);
  for (std::size_t f = 0; f < ph.flows.size(); ++f)
    if (!chained[f]) send(task, ph.flows[f].src, ph.flows[f].dst, ph.flows[f].bytes);
  for (std::size_t k = 0; k < ph.chains.size(); ++k)
    send_chain(task, run.prep->chain_pair[run.phase][k], ph.flows[ph.chains[k].first].bytes);
}

void EventScheduler::begin(std::size_t i) {
  const auto& t = g_.tasks[i];
  out_.start[i] = now();
  if (!t.is_collective && prepared_[i]) {
    // A PCIe copy: flows on the host links, on copy engines beside the GPU.
    running_[i] = Running{prepared_[i], 0};
    start_phase(i);
  } else if (!t.is_collective) {
    // Data loading runs on the host's CPUs, beside the GPU rather than on it.
    // PCIe copies of no bytes run on copy engines, beside the GPU as well.
    if (t.category == taskgraph::Category::Input || t.category == taskgraph::Category::Copy ||
        timed_rank_[static_cast<std::size_t>(t.rank)])
      after(in_.seconds(i), i, Role::Last);
    else
      exec(i, in_.platform.fabric_endpoint(t.rank), in_.seconds(i), Role::Last);
  } else if (prepared_[i]->lowered.phases.empty()) {
    share_cores(i);
    after(0.0, i, Role::Last);
  } else {
    share_cores(i);
    running_[i] = Running{prepared_[i], 0};
    start_phase(i);
  }
}

// Shared cores (ReplayInput::comm_core_share): while a GPU has a collective in flight its host
// runs at its slower pstate, so compute keeps 1 - share of its speed, as the analytical
// replay's rate does.
void EventScheduler::share_cores(std::size_t task) {
  const double share = in_.comm_core_share;
  if (share <= 0) return;
  const auto& c = g_.tasks[task].collective();
  std::set<int> gpus;
  if (c.only >= 0) gpus.insert(c.only);
  else
    for (const auto& grp : groups_of(g_, c)) gpus.insert(grp.begin(), grp.end());
  auto& endpoints = comm_endpoints_[task];
  for (int gpu : gpus) {
    const int e = in_.platform.fabric_endpoint(gpu);
    endpoints.push_back(e);
    if (endpoint_comms_[e]++ == 0) slow_cores(e, true);
  }
}

void EventScheduler::release_cores(std::size_t task) {
  auto it = comm_endpoints_.find(task);
  if (it == comm_endpoints_.end()) return;
  for (int e : it->second)
    if (--endpoint_comms_[e] == 0) slow_cores(e, false);
  comm_endpoints_.erase(it);
}

void EventScheduler::finish(std::size_t task) {
  release_cores(task);
  out_.end[task] = now();
  dispatch_.ended(task, [this](std::size_t i) { begin(i); });
}

void EventScheduler::done(std::size_t task, Role r) {
  if (r == Role::Last) return finish(task);
  auto& run = running_.at(task);
  if (r == Role::Flow) {
    // The step latencies the aggregated flows do not pay come once they all finish.
    if (--run.flows_left == 0) after(run.prep->lowered.phases[run.phase].latency, task, Role::PhaseEnd);
  } else if (++run.phase < run.prep->lowered.phases.size()) {
    start_phase(task);
  } else {
    running_.erase(task);
    finish(task);
  }
}

}  // namespace dtsim::replay
