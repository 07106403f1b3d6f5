#include "sim/replay/step_reuse.hpp"

#include <algorithm>
#include <cmath>

#include "sim/replay/replay.hpp"

namespace dtsim::replay {

StepReuse::StepReuse(const std::vector<int>& step_of, std::size_t per_step, int steps, bool roots_alike)
    : step_of_(step_of), per_step_(per_step), steps_(steps), roots_alike_(roots_alike), status_(step_of.size(), kWaiting) {}

bool StepReuse::ready(std::size_t task) {
  const int k = step_of_[task];
  if (decided_) return reused_ && k >= held_from_;
  status_[task] = kQueued;  // until started
  if (k <= seen_) return false;
  seen_ = k;
  if (k == 1) {
    first_ = take(1);
    // Step 0 is over when step 1 begins: the state is the one at time 0, shifted.
    if (roots_alike_ && first_.valid &&
        std::all_of(first_.status.begin(), first_.status.end(), [](char c) { return c == kEnded; })) {
      decided_ = reused_ = true;
      held_from_ = 1;
      status_[task] = kWaiting;
    }
    return reused_;
  }
  // The first task of step 2 (or, out of order, of a later step): decide now, before it starts.
  decided_ = true;
  if (k == 2 && first_.valid) {
    second_ = take(2);
    reused_ = second_.valid && same(first_, second_);
  }
  if (reused_) status_[task] = kWaiting;
  return reused_;
}

StepReuse::State StepReuse::take(int k) const {
  State s;
  s.at = clock();
  const std::size_t from = static_cast<std::size_t>(k - 1) * per_step_;
  // Steps before k - 1 must be over: their tasks would have nothing to map to a step earlier.
  for (std::size_t i = 0; i < from; ++i)
    if (status_[i] != kEnded) return s;
  s.status.assign(status_.begin() + static_cast<std::ptrdiff_t>(from), status_.begin() + static_cast<std::ptrdiff_t>(from + per_step_));
  std::vector<std::size_t> running;
  for (std::size_t j = 0; j < per_step_; ++j)
    if (s.status[j] == kRunning) running.push_back(from + j);
  s.running.assign(running.size(), {});
  if (describe) describe(running, s.at, s.running);
  s.valid = true;
  return s;
}

bool StepReuse::same(const State& a, const State& b) {
  if (a.status != b.status || a.running.size() != b.running.size()) return false;
  const double scale = std::max({1e-6, std::abs(a.at), std::abs(b.at)});
  for (std::size_t r = 0; r < a.running.size(); ++r) {
    const auto& x = a.running[r];
    const auto& y = b.running[r];
    if (x.size() != y.size()) return false;
    for (std::size_t v = 0; v < x.size(); ++v) {
      // Times relative to the state's instant compare against the clock's magnitude (their
      // rounding); amounts of work against their own.
      const double tol = kTolerance * std::max({scale, std::abs(x[v]), std::abs(y[v])});
      if (std::abs(x[v] - y[v]) > tol) return false;
    }
  }
  return true;
}

// Each step is the one before plus the period, added once per step as the replay's clock would
// have: a task that starts when another ends keeps the same time as it, to the last bit.
void StepReuse::extend(Timeline& t, bool flows_per_launch) const {
  t.steps_replayed = reused_ ? held_from_ : steps_;
  if (!reused_) return;
  const std::size_t n = per_step_;
  const auto last = static_cast<std::size_t>(steps_ - 1);
  auto shift = [&](std::size_t to, std::size_t from, double d) {
    for (std::size_t j = 0; j < n; ++j) {
      t.start[to * n + j] = t.start[from * n + j] + d;
      t.end[to * n + j] = t.end[from * n + j] + d;
    }
  };
  if (held_from_ == 1) {  // every step is step 0, shifted
    for (std::size_t k = 1; k <= last; ++k) shift(k, k - 1, first_.at);
    if (flows_per_launch) t.flows *= static_cast<std::size_t>(steps_);
  } else {
    const double d = second_.at - first_.at;
    // The two-step replay's step 1 is the last step's shape; put it there first.
    shift(last, 1, 0.0);
    // Step 1 of a long replay: as seen up to T_2, then step 0 shifted.
    for (std::size_t j = 0; j < n; ++j) {
      const char st = second_.status[j];
      if (st < kRunning) t.start[n + j] = t.start[j] + d;
      if (st < kEnded) t.end[n + j] = t.end[j] + d;
    }
    for (std::size_t k = 2; k < last; ++k) shift(k, k - 1, d);
    for (std::size_t k = 2; k < static_cast<std::size_t>(steps_); ++k) shift(last, last, d);
    if (flows_per_launch) t.flows = t.flows / 2 * static_cast<std::size_t>(steps_);
  }
  t.makespan = 0;
  for (double e : t.end) t.makespan = std::max(t.makespan, e);
}

void StepReuse::follow(const double& now, const Timeline& t) {
  clock = [&now] { return now; };
  describe = [&t](const std::vector<std::size_t>& running, double at, std::vector<std::vector<double>>& d) {
    for (std::size_t r = 0; r < running.size(); ++r) d[r] = {t.start[running[r]] - at, t.end[running[r]] - at};
  };
}

}  // namespace dtsim::replay
