#pragma once
#include <cstddef>
#include <vector>

#include "sim/replay/replay.hpp"

namespace dtsim::replay {

// What one GPU waited for while it sat idle. An idle span ends when one of its tasks starts; that
// task waited for the dependency that ended last (its binding dependency), which waited for its
// own, and so on: the span is walked back along that chain until it reaches the span's start.
// - a collective or transfer in flight (or queued behind others) on the chain: exposed
//   communication;
// - a data loader: input stall;
// - a compute task of a GPU outside this GPU's pipeline (a data-parallel replica): that replica
//   finished later, straggler wait for the rest of the span;
// - compute of another stage of its pipeline: waiting for peer stages. A uniform pipeline waits
//   for them only while it fills and drains: pipeline bubble. What the peer stages were slower
//   than this GPU's pace is split by cause: what slowdowns explain (a slow or jittery GPU, a
//   throttle: tasks that ran longer than their nominal price) is straggler wait; what uneven work
//   at nominal prices explains (the embedding or LM head on one stage, uneven stage_layers) is
//   stage imbalance.
//
// Slower than this GPU's pace: at a uniform pace every stage's passes of one kind (forward,
// backward, B, W) and model chunk would take as long as this GPU's. A task of stage r that runs
// longer than its nominal price times (this GPU's time for its kind / r's nominal time for it)
// runs late by the difference. Of that, what it would run late with every duration at its
// nominal price (its price times 1 - this GPU's nominal time for its kind / r's) is uneven work; the rest is slowdown, and only when the task's or this GPU's durations are off
// their nominal prices (so without stragglers there is none). Lateness is carried along binding
// dependencies (the least late one when several end together), so each task knows how much later it
// ends than at a uniform pace, and how much of that slowdowns explain. Of a wait for peer stages,
// the late part is how much later the awaited task ends than this GPU's own last task did, at most
// the wait; of it, the straggler part is the same difference of slowdown lateness, the rest stage
// imbalance.
class Waits {
 public:
  // `slowed_by_interference`: every slowdown is a stack's communication interference (no
  // stragglers), so what slowdowns explain is booked as comm_interference, not straggler wait.
  Waits(const taskgraph::TaskGraph& g, const Timeline& t, const std::vector<double>& work_seconds, int rank,
        bool slowed_by_interference = false);

  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  // Charges [from, to] to `b`. `waiter` is the GPU's task that starts at `to`, or later when the
  // span ends at the horizon (kNone when it has none left: the task that ends last by `to` closes
  // the span); `before` is its own task that ended last by `from` (kNone at the outset).
  // With `spans`, also appends where each part lies in [from, to], in time order.
  void charge(double from, double to, std::size_t waiter, std::size_t before, Breakdown& b,
              std::vector<IdleSpan>* spans = nullptr) const;

  // The dependency task `i` waited for: the awaited one that ended last; kNone without any.
  std::size_t binding(std::size_t i) const { return binding_[i]; }

 private:
  std::size_t ending_last_by(double when) const;

  const taskgraph::TaskGraph& g_;
  const Timeline& t_;
  int rank_;
  bool interference_;
  std::vector<std::size_t> binding_;
  std::vector<double> late_;           // per task: seconds later than at a uniform pace
  std::vector<double> slowed_;         // per task: the part of late_ that slowdowns explain
  std::vector<double> uneven_;         // per task: seconds later than at a uniform pace, at nominal prices
  std::vector<char> in_pipeline_;      // per GPU: a stage of this GPU's pipeline
};

}  // namespace dtsim::replay
