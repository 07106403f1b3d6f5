#pragma once
// A closed-form step time for sweeps (issue 18, item 2): each pipeline chunk's forward and
// backward priced once for one micro-batch, from the same works and cost model the planner and
// the analytical replay use, then composed by the schedule's formula (f_s, b_s: stage s's
// forward and backward of one micro-batch; m micro-batches, p stages):
//   1F1B:        T = sum_s (f_s + b_s) + max_s [(m - 1) b_s + (m - 1 - w_s) f_s] + the transfers,
//                w_s = min(p - s - 1, m - 1) the forwards stage s ran in its warm-up
//   GPipe:       T = sum_s (f_s + b_s) + (m - 1) (max_s f_s + max_s b_s) + the transfers
//   interleaved: T = m max_s (f_s + b_s) + the fill and drain through each stage's first chunk
//                + the transfers
// (for equal stages: (m + p - 1) and (m + (p - 1)/v) micro-batch times, Narayanan et al. 2021),
// plus what the gradient buckets, the tied-embedding sum, the optimizer and ZeRO's parameter
// gather add after each stage's last backward; ZeRO-3 follows its per-layer gathers one
// micro-batch at a time. No task graph is built.
//
// It covers what `closed_form_gap` accepts; anything else (other schedules, frameworks, update
// rules, stragglers, input pipelines, compression...) is replayed, so a new kind of strategy
// is safe until it is taught here.
#include <memory>
#include <string>

#include "sim/config/scenario.hpp"
#include "sim/results/result.hpp"

namespace dtsim::results {

// Why the closed form does not price `s` ("" when it does).
std::string closed_form_gap(const config::Scenario& s);

// Prices strategies for one model, device, cluster and batch; only `parallelism` may differ
// between the scenarios given to estimate(). Caches model graphs, per-layer prices and
// collective times between calls, so it is not thread-safe: one per thread.
class ClosedForm {
 public:
  explicit ClosedForm(const config::Scenario& base);
  ~ClosedForm();
  ClosedForm(const ClosedForm&) = delete;
  ClosedForm& operator=(const ClosedForm&) = delete;

  // The Result simulate() would give, as far as the sweep reads it: step time (estimated),
  // throughput, MFU, memory and whether it fits (exact, from the planner's own layout), the
  // capacity plan; no timeline or breakdown. Throws as simulate() does for a strategy that
  // cannot be laid out.
  Result estimate(const config::Scenario& s);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dtsim::results
