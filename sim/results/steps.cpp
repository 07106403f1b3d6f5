#include "sim/results/steps.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>

namespace dtsim::results {

taskgraph::TaskGraph repeat_steps(const taskgraph::TaskGraph& one, int steps, std::vector<int>& step_of, int lead) {
  taskgraph::TaskGraph g = one.empty_copy();
  const int n = static_cast<int>(one.tasks.size());
  const std::size_t per_step = static_cast<std::size_t>(n) + (lead >= 0 ? 1 : 0);
  g.tasks.reserve(per_step * static_cast<std::size_t>(steps));
  step_of.clear();
  step_of.reserve(per_step * static_cast<std::size_t>(steps));
  // Every step has the same shape: each GPU's first and last tasks in step order are the same
  // indices in every copy, found once.
  auto in_order = [&](const taskgraph::Task& t) { return !t.is_collective && !t.off_step_order; };
  std::map<int, std::pair<int, int>> ends_of_rank;  // GPU -> its first and last task of a step
  for (int i = 0; i < n; ++i)
    if (const auto& t = one.tasks[static_cast<std::size_t>(i)]; in_order(t)) {
      auto [it, fresh] = ends_of_rank.try_emplace(t.rank, i, i);
      it->second.second = i;
    }
  std::vector<int> last_before(static_cast<std::size_t>(n), -1);  // a first task: its GPU's last task of a step
  for (const auto& [rank, ends] : ends_of_rank) last_before[static_cast<std::size_t>(ends.first)] = ends.second;
  std::vector<int> everyone_done;  // per step, with a staleness bound
  int previous_base = 0;  // where the previous step's copy of the graph starts
  for (int k = 0; k < steps; ++k) {
    const int base = static_cast<int>(g.tasks.size());
    for (int i = 0; i < n; ++i) {
      taskgraph::Task t = one.tasks[static_cast<std::size_t>(i)];
      for (int& d : t.deps) d += base;
      for (int& d : t.any_deps) d += base;
      if (k > 0)
        for (int d : t.after_previous_step) t.deps.push_back(previous_base + d);
      if (const int last = last_before[static_cast<std::size_t>(i)]; last >= 0) {
        if (k > 0) t.deps.push_back(previous_base + last);
        if (lead >= 0 && k - lead - 1 >= 0) t.deps.push_back(everyone_done[static_cast<std::size_t>(k - lead - 1)]);
      }
      step_of.push_back(k);
      g.tasks.push_back(std::move(t));
    }
    if (lead >= 0) {  // no network traffic: it only joins the GPUs' ends of the step
      std::vector<int> ends;
      for (const auto& [rank, first_last] : ends_of_rank) ends.push_back(base + first_last.second);
      everyone_done.push_back(g.add_collective(taskgraph::Collective{}, "staleness bound", std::move(ends)));
      step_of.push_back(k);
    }
    previous_base = base;
  }
  return g;
}

replay::TaskScales task_scales(const taskgraph::TaskGraph& g, const std::vector<int>& step_of, int steps,
                               const StragglerSpec& s, int group) {
  if (group < 1) throw std::logic_error("a tensor x context group of no GPU");
  std::vector<int> ranks;
  for (const auto& t : g.tasks)
    if (!t.is_collective && t.category == taskgraph::Category::Compute) ranks.push_back(t.rank);
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  if (!ranks.empty() && ranks.front() < 0) throw std::logic_error("a compute task without a GPU");
  // Every member of those GPUs' groups draws, in GPU order (with groups of one: the same draws).
  std::vector<int> members;
  for (int r : ranks)
    for (int m = r / group * group; m < r / group * group + group; ++m) members.push_back(m);
  std::sort(members.begin(), members.end());
  members.erase(std::unique(members.begin(), members.end()), members.end());
  replay::TaskScales out;
  out.step_of = step_of.empty() ? nullptr : &step_of;
  out.gpus = ranks.empty() ? 0 : static_cast<std::size_t>(ranks.back()) + 1;
  const std::size_t cells = out.gpus * static_cast<std::size_t>(std::max(steps, 1));
  out.draw.assign(cells, 1.0);
  if (group > 1) out.pacer.assign(cells, -1);
  std::mt19937_64 rng(s.seed);
  auto uniform = [&] { return (static_cast<double>(rng() >> 11) + 0.5) / 9007199254740992.0; };  // (0, 1)
  std::map<int, double> slow;  // GPU -> its fixed slowdowns, multiplied
  for (const auto& [gpu, x] : s.slow_gpus) slow.try_emplace(gpu, 1.0).first->second *= x;
  std::vector<double> own(members.empty() ? 0 : static_cast<std::size_t>(members.back()) + 1, 1.0);  // this step's, by member
  for (int k = 0; k < steps; ++k) {
    for (int r : members) {
      double m = 1.0;
      switch (s.jitter) {
        case Jitter::None: break;
        case Jitter::Exponential: m = 1.0 - s.mean * std::log(uniform()); break;
        case Jitter::Lognormal: {  // Box-Muller, written out so every platform draws the same numbers
          const double u1 = uniform(), u2 = uniform();
          m = std::exp(s.sigma * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
          break;
        }
        case Jitter::Empirical:
          m = s.values[std::min(s.values.size() - 1, static_cast<std::size_t>(uniform() * static_cast<double>(s.values.size())))];
          break;
      }
      if (auto it = slow.find(r); it != slow.end()) m *= it->second;
      own[static_cast<std::size_t>(r)] = m;
    }
    for (int r : ranks) {
      // The slowest member; on a tie the first, so that without slowdowns the GPU names itself.
      int pace = r / group * group;
      for (int m = pace + 1; m < r / group * group + group; ++m)
        if (own[static_cast<std::size_t>(m)] > own[static_cast<std::size_t>(pace)]) pace = m;
      const std::size_t at = static_cast<std::size_t>(k) * out.gpus + static_cast<std::size_t>(r);
      out.draw[at] = own[static_cast<std::size_t>(pace)];
      if (group > 1) out.pacer[at] = own[static_cast<std::size_t>(pace)] > own[static_cast<std::size_t>(r)] ? pace : r;
    }
  }
  return out;
}

std::vector<replay::Variability::Throttle> group_throttles(const StragglerSpec& s, int group) {
  using T = replay::Variability::Throttle;
  if (group == 1) {
    std::vector<T> out;
    for (const auto& t : s.throttles) out.push_back({t.gpu, t.start_s, t.duration_s, t.slowdown});
    return out;
  }
  std::map<int, std::vector<T>> of_rep;
  std::map<int, std::set<int>> gpus_of_rep;
  for (const auto& t : s.throttles) {
    of_rep[t.gpu / group * group].push_back({t.gpu / group * group, t.start_s, t.duration_s, t.slowdown});
    gpus_of_rep[t.gpu / group * group].insert(t.gpu);
  }
  std::vector<T> out;
  for (auto& [rep, windows] : of_rep) {
    if (gpus_of_rep[rep].size() == 1) {  // one GPU's windows never overlap (the scenario checks)
      out.insert(out.end(), windows.begin(), windows.end());
      continue;
    }
    // Cut time at every window's ends; each piece some window covers runs at the slowest of them.
    std::vector<double> cuts;
    for (const auto& w : windows) cuts.insert(cuts.end(), {w.start_s, w.start_s + w.duration_s});
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
      double slowest = 0;
      for (const auto& w : windows)
        if (w.start_s <= cuts[i] && cuts[i + 1] <= w.start_s + w.duration_s) slowest = std::max(slowest, w.slowdown);
      if (slowest == 0) continue;
      if (!out.empty() && out.back().gpu == rep && out.back().slowdown == slowest && out.back().start_s + out.back().duration_s == cuts[i])
        out.back().duration_s = cuts[i + 1] - out.back().start_s;
      else
        out.push_back({rep, cuts[i], cuts[i + 1] - cuts[i], slowest});
    }
  }
  return out;
}

namespace {

// When each step ends: when its gradient synchronisation completes, the job's cadence. A replica
// that lags behind (and whose gradients backup workers drop) does not hold it up. Without any
// collective, when its last task ends.
std::vector<double> step_ends(const taskgraph::TaskGraph& g, const replay::Timeline& t, const std::vector<int>& step_of, int steps) {
  bool synced = false;
  for (const auto& task : g.tasks) synced = synced || (task.is_collective && task.collective().op != taskgraph::CollectiveOp::SendRecv);
  std::vector<double> end(static_cast<std::size_t>(steps), 0.0);
  for (std::size_t i = 0; i < g.tasks.size(); ++i) {
    const auto& task = g.tasks[i];
    if (synced && !(task.is_collective && task.collective().op != taskgraph::CollectiveOp::SendRecv)) continue;
    end[static_cast<std::size_t>(step_of[i])] = std::max(end[static_cast<std::size_t>(step_of[i])], t.end[i]);
  }
  return end;
}

// Mean, median, 99th percentile and maximum of the step times.
void summarise_steps(StepReport& r) {
  std::vector<double> sorted = r.step_times;
  std::sort(sorted.begin(), sorted.end());
  auto pct = [&](double q) { return sorted[std::min(sorted.size() - 1, static_cast<std::size_t>(q * (sorted.size() - 1) + 0.5))]; };
  double sum = 0;
  for (double x : sorted) sum += x;
  r.mean = sum / static_cast<double>(sorted.size());
  r.p50 = pct(0.5);
  r.p99 = pct(0.99);
  r.max = sorted.back();
}

}  // namespace

StepReport report_steps(const taskgraph::TaskGraph& g, const replay::Timeline& t, const std::vector<int>& step_of, int steps,
                        const replay::TaskScales* scales, const StragglerSpec* st, int group) {
  StepReport r;
  const std::vector<double> end = step_ends(g, t, step_of, steps);
  double prev = 0;
  for (double e : end) {
    r.step_times.push_back(e - prev);
    prev = e;
  }
  summarise_steps(r);
  // At the synchronisation of each step: how long each GPU sat idle between its last backward and
  // the end of its optimizer work (one update, or one per bucket), and whose backward ended last.
  std::map<int, std::vector<std::size_t>> own;  // per GPU, its stream's tasks (not its loader)
  for (std::size_t i = 0; i < g.tasks.size(); ++i)
    if (!g.tasks[i].is_collective && g.tasks[i].category != taskgraph::Category::Input) own[g.tasks[i].rank].push_back(i);
  std::map<int, int> critical;
  std::map<int, double> wait;
  std::vector<std::pair<double, int>> latest(static_cast<std::size_t>(steps), {-1.0, -1});
  for (auto& [gpu, tasks] : own) {
    const auto k_steps = static_cast<std::size_t>(steps);
    std::vector<double> backward_end(k_steps, -1.0), update_end(k_steps, -1.0);
    for (std::size_t i : tasks) {
      const auto k = static_cast<std::size_t>(step_of[i]);
      if (g.tasks[i].category == taskgraph::Category::Compute) backward_end[k] = std::max(backward_end[k], t.end[i]);
      if (g.tasks[i].category == taskgraph::Category::Optimizer) update_end[k] = std::max(update_end[k], t.end[i]);
    }
    // Its busy time as disjoint intervals (kernels may run at once).
    std::sort(tasks.begin(), tasks.end(), [&](std::size_t a, std::size_t b) { return t.start[a] < t.start[b]; });
    std::vector<std::pair<double, double>> busy;
    for (std::size_t i : tasks) {
      if (!busy.empty() && t.start[i] <= busy.back().second) busy.back().second = std::max(busy.back().second, t.end[i]);
      else busy.emplace_back(t.start[i], t.end[i]);
    }
    for (std::size_t k = 0; k < k_steps; ++k) {
      if (update_end[k] < 0 || backward_end[k] < 0) continue;
      const double from = backward_end[k], to = std::max(from, update_end[k]);
      double idle = to - from;
      auto it = std::lower_bound(busy.begin(), busy.end(), from, [](const auto& iv, double x) { return iv.second <= x; });
      for (; it != busy.end() && it->first < to; ++it) idle -= std::min(to, it->second) - std::max(from, it->first);
      wait[gpu] += std::max(0.0, idle);
      if (backward_end[k] > latest[k].first) latest[k] = {backward_end[k], gpu};
    }
  }
  // The member of the critical GPU's group that set its pace in step k.
  auto pacer = [&](std::size_t k, int gpu) {
    if (scales && scales->pacer_of(k, gpu) != gpu) return scales->pacer_of(k, gpu);
    if (!st || group <= 1) return gpu;
    const double from = k == 0 ? 0.0 : end[k - 1], to = end[k];
    double slowest = 1.0;
    for (const auto& th : st->throttles)
      if (th.gpu / group == gpu / group && th.start_s < to && from < th.start_s + th.duration_s && th.slowdown > slowest)
        slowest = th.slowdown, gpu = th.gpu;
    return gpu;
  };
  for (std::size_t k = 0; k < latest.size(); ++k)
    if (const int gpu = latest[k].second; gpu >= 0) ++critical[pacer(k, gpu)];
  for (const auto& [gpu, n] : critical) r.critical.emplace_back(gpu, n);
  std::sort(r.critical.begin(), r.critical.end(), [](auto a, auto b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
  if (r.critical.size() > 10) r.critical.resize(10);
  double total = 0;
  for (const auto& [gpu, w] : wait) {
    total += w;
    if (w / steps > r.max_wait_s) r.max_wait_s = w / steps, r.max_wait_gpu = gpu;
  }
  r.mean_wait_s = wait.empty() ? 0.0 : total / static_cast<double>(wait.size()) / steps;
  return r;
}

AsyncReport report_async(const taskgraph::TaskGraph& g, const replay::Timeline& t, double samples_per_update) {
  AsyncReport r;
  // Updates in the order the shared weights took them in: by arrival, simultaneous ones in
  // worker order.
  std::vector<std::pair<double, int>> order;
  for (std::size_t i = 0; i < g.tasks.size(); ++i)
    if (g.tasks[i].is_collective && g.tasks[i].collective().only >= 0) order.emplace_back(t.end[i], g.tasks[i].collective().only);
  if (order.empty()) return r;
  std::sort(order.begin(), order.end());
  // Throughput while every worker is still running: up to the first one's last update.
  std::map<int, double> last;
  for (const auto& [end, w] : order) last[w] = end;
  r.window_s = std::numeric_limits<double>::infinity();
  for (const auto& [w, end] : last) r.window_s = std::min(r.window_s, end);
  for (const auto& [end, w] : order) r.updates += end <= r.window_s;
  r.samples_per_s = r.window_s > 0 ? static_cast<double>(r.updates) * samples_per_update / r.window_s : 0.0;
  // An update's staleness: how many other updates the weights took in after this worker last
  // pulled them (right after its previous update) and before its own; its gradient was computed
  // on weights that many versions old.
  std::vector<double> stale;
  std::map<int, std::size_t> previous;  // worker -> position of its last update
  for (std::size_t k = 0; k < order.size(); ++k) {
    const int w = order[k].second;
    auto it = previous.find(w);
    stale.push_back(static_cast<double>(it == previous.end() ? k : k - it->second - 1));
    previous[w] = k;
  }
  std::sort(stale.begin(), stale.end());
  double sum = 0;
  for (double x : stale) sum += x;
  const auto at = [&](double q) { return stale[static_cast<std::size_t>(q * static_cast<double>(stale.size() - 1) + 0.5)]; };
  r.staleness_mean = sum / static_cast<double>(stale.size());
  r.staleness_p50 = at(0.5);
  r.staleness_p99 = at(0.99);
  r.staleness_max = stale.back();
  return r;
}

}  // namespace dtsim::results
