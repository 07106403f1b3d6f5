#include <algorithm>

#include "sim/replay/replay.hpp"
#include "sim/replay/waits.hpp"

namespace dtsim::replay {

std::vector<std::vector<int>> groups_of(const taskgraph::TaskGraph& g, const taskgraph::Collective& c) {
  std::vector<std::vector<int>> out;
  out.reserve(c.groups.size());
  for (int id : c.groups) out.push_back(g.groups[static_cast<std::size_t>(id)]);
  return out;
}

Breakdown& Breakdown::operator+=(const Breakdown& o) {
  compute += o.compute;
  exposed_communication += o.exposed_communication;
  pipeline_bubble += o.pipeline_bubble;
  optimizer += o.optimizer;
  straggler_wait += o.straggler_wait;
  input_stall += o.input_stall;
  checkpoint += o.checkpoint;
  stage_imbalance += o.stage_imbalance;
  comm_interference += o.comm_interference;
  return *this;
}

Breakdown& Breakdown::operator*=(double f) {
  for (double* part :
       {&compute, &exposed_communication, &pipeline_bubble, &optimizer, &straggler_wait, &input_stall, &stage_imbalance, &checkpoint,
        &comm_interference})
    *part *= f;
  return *this;
}

const char* to_string(IdleCause c) {
  switch (c) {
    case IdleCause::PipelineBubble: return "pipeline bubble";
    case IdleCause::StageImbalance: return "stage imbalance";
    case IdleCause::StragglerWait: return "straggler wait";
    case IdleCause::ExposedCommunication: return "exposed communication";
    case IdleCause::InputStall: return "input stall";
    case IdleCause::CommInterference: return "communication interference";
  }
  return "?";
}

namespace {

// PCIe copies run on the copy engines beside the GPU, as the loader does on the host.
bool on_stream(const taskgraph::Task& t) {
  return !t.is_collective && t.category != taskgraph::Category::Input && t.category != taskgraph::Category::Copy;
}

// The GPU whose own stream (not its data loader) ends last; -1 when only collectives ran.
int last_gpu(const taskgraph::TaskGraph& g, const Timeline& t) {
  std::size_t last = g.tasks.size();
  for (std::size_t i = 0; i < g.tasks.size(); ++i)
    if (on_stream(g.tasks[i]) && (last == g.tasks.size() || t.end[i] > t.end[last])) last = i;
  return last == g.tasks.size() ? -1 : g.tasks[last].rank;
}

// The intervals in which a collective `rank` takes part is in flight, sorted and merged.
std::vector<std::pair<double, double>> comm_intervals(const taskgraph::TaskGraph& g, const Timeline& t, int rank) {
  std::vector<std::pair<double, double>> comm;
  for (std::size_t i = 0; i < g.tasks.size(); ++i) {
    const auto& task = g.tasks[i];
    if (!task.is_collective) continue;
    bool member = task.collective().only == rank;
    if (task.collective().only < 0)
      for (const auto& grp : groups_of(g, task.collective()))
        member = member || std::find(grp.begin(), grp.end(), rank) != grp.end();
    if (member && t.end[i] > t.start[i]) comm.emplace_back(t.start[i], t.end[i]);
  }
  std::sort(comm.begin(), comm.end());
  std::vector<std::pair<double, double>> merged;
  for (const auto& iv : comm) {
    if (!merged.empty() && iv.first <= merged.back().second) merged.back().second = std::max(merged.back().second, iv.second);
    else merged.push_back(iv);
  }
  return merged;
}

// Of the GPU's tasks starting at `next_start` (from mine[next] on), the first that waited for
// something ending then; else the first of them; kNone when none is left.
std::size_t first_waiter(const Timeline& t, const Waits& waits, const std::vector<std::size_t>& mine, std::size_t next,
                         double next_start) {
  if (next >= mine.size()) return Waits::kNone;
  for (std::size_t k = next; k < mine.size() && t.start[mine[k]] == next_start; ++k)
    if (const std::size_t d = waits.binding(mine[k]); d != Waits::kNone && t.end[d] == next_start) return mine[k];
  return mine[next];
}

}  // namespace

Breakdown step_breakdown(const taskgraph::TaskGraph& g, const Timeline& t, const std::vector<double>& work_seconds,
                         const std::vector<double>& work_comm_seconds, BreakdownScope scope) {
  Breakdown b;
  const double horizon = scope.horizon >= 0 ? scope.horizon : t.makespan;
  const int rank = scope.rank >= 0 ? scope.rank : last_gpu(g, t);
  if (rank < 0) {
    b.exposed_communication = horizon;
    return b;
  }
  b.rank = rank;
  std::vector<std::size_t> mine;  // the GPU's own stream; its loader runs beside it
  for (std::size_t i = 0; i < g.tasks.size(); ++i)
    if (on_stream(g.tasks[i]) && g.tasks[i].rank == rank) mine.push_back(i);
  // Ties in start time keep graph order, which follows the stream (an instant task before the
  // pass that waits for it).
  std::sort(mine.begin(), mine.end(), [&](std::size_t x, std::size_t y) { return t.start[x] != t.start[y] ? t.start[x] < t.start[y] : x < y; });
  const Waits waits(g, t, work_seconds, rank, scope.slowed_by_interference);
  // Shared cores: the intervals in which a collective of this GPU is in flight, merged.
  const auto comm = scope.comm_core_share > 0 ? comm_intervals(g, t, rank) : std::vector<std::pair<double, double>>{};
  auto overlap = [&](double from, double to) {  // disjoint and sorted: from the first ending after `from`
    double o = 0;
    auto it = std::lower_bound(comm.begin(), comm.end(), from, [](const auto& iv, double x) { return iv.second <= x; });
    for (; it != comm.end() && it->first < to; ++it) o += std::min(to, it->second) - std::max(from, it->first);
    return o;
  };

  // Busy time, split among the tasks running at once.
  auto busy = [&](std::size_t i, double seconds, double from, double to) {
    const auto& task = g.tasks[i];
    if (!comm.empty() && to > from && task.category != taskgraph::Category::Communication) {
      const double progress = seconds * scope.comm_core_share * overlap(from, to) / (to - from);
      (scope.sms ? b.comm_interference : b.exposed_communication) += progress;
      seconds -= progress;
    }
    if (task.category == taskgraph::Category::Optimizer) {
      b.optimizer += seconds;
    } else if (task.category == taskgraph::Category::Communication) {  // e.g. compression kernels
      b.exposed_communication += seconds;
    } else {  // the inline collectives' share of a pass (tensor parallelism) is communication
      const auto w = static_cast<std::size_t>(task.work);
      const double whole = work_seconds[w];
      const double comm = whole > 0 ? seconds * work_comm_seconds[w] / whole : 0.0;
      const auto* slowed = scope.work_interference_seconds;
      const double lost = whole > 0 && slowed && w < slowed->size() ? seconds * (*slowed)[w] / whole : 0.0;
      b.exposed_communication += comm;
      b.comm_interference += lost;
      b.compute += seconds - comm - lost;
    }
  };
  std::vector<std::size_t> running;
  std::size_t next = 0, before = Waits::kNone;  // `before`: its task that ended last so far
  double clock = 0;
  while (clock < horizon) {
    for (; next < mine.size() && t.start[mine[next]] <= clock; ++next) running.push_back(mine[next]);
    for (auto it = running.begin(); it != running.end();) {
      if (t.end[*it] > clock) {
        ++it;
        continue;
      }
      if (before == Waits::kNone || t.end[*it] >= t.end[before]) before = *it;
      it = running.erase(it);
    }
    const double next_start = next < mine.size() ? t.start[mine[next]] : horizon;
    if (running.empty()) {
      // Idle until its next task starts (it may start past the horizon): the first of those
      // starting then that waited for something.
      const double until = std::min(next_start, horizon);
      waits.charge(clock, until, first_waiter(t, waits, mine, next, next_start), before, b, scope.idle);
      clock = until;
      continue;
    }
    double until = std::min(next_start, horizon);
    for (std::size_t i : running) until = std::min(until, t.end[i]);
    const double share = (until - clock) / static_cast<double>(running.size());
    for (std::size_t i : running) busy(i, share, clock, until);
    clock = until;
  }
  return b;
}

}  // namespace dtsim::replay
