#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "sim/faults/faults.hpp"
#include "sim/replay/replay.hpp"
#include "sim/taskgraph/task_graph.hpp"

// Several training steps in one replay, with seeded per-GPU slowdowns.
namespace dtsim::results {

using faults::Jitter;
using faults::StragglerSpec;

// `steps` copies of one step's graph; each step's first tasks on a GPU wait for that GPU's last
// task of the step before. With `lead` >= 0 no GPU starts step k before every GPU finished step
// k - lead - 1 (a staleness bound). step_of[i] gives task i's step.
taskgraph::TaskGraph repeat_steps(const taskgraph::TaskGraph& one, int steps, std::vector<int>& step_of, int lead = -1);

// Duration multipliers: one draw per (GPU, step) applied to all its compute tasks, so a GPU is
// slow for a whole step (throttling, noisy neighbour), as the expected-maximum closed form
// assumes. Draws happen in (step, GPU) order from one seeded generator. step_of[i] gives task i's
// step (empty: all in step 0); the result refers to it.
// A compute task's GPU stands for its tensor x context group, `group` consecutive GPUs (Placement):
// their collectives inside every layer wait for all of them, so the group runs at its slowest
// member's pace. Every member gets its draw and slowdown; the task's multiplier is their maximum.
replay::TaskScales task_scales(const taskgraph::TaskGraph& g, const std::vector<int>& step_of, int steps,
                               const StragglerSpec& s, int group = 1);

// Throttles on the GPUs whose group's compute runs on its first GPU (`group` as above), moved
// there: where windows of several members overlap, the slowest throttle holds.
std::vector<replay::Variability::Throttle> group_throttles(const StragglerSpec& s, int group);

struct StepReport {
  std::vector<double> step_times;
  double mean = 0, p50 = 0, p99 = 0, max = 0;
  std::vector<std::pair<int, int>> critical;  // GPU, steps its backward ended last
  double mean_wait_s = 0, max_wait_s = 0;     // per GPU and step: idle between its backward and its optimizer
  int max_wait_gpu = -1;
};
// Asynchronous updates: throughput and how stale the applied gradients were, counted in updates
// by other workers (Dean et al. 2012 and Ho et al. 2013 measure staleness the same way).
struct AsyncReport {
  std::size_t updates = 0;  // completed while every worker was still running
  double window_s = 0, samples_per_s = 0;
  double staleness_mean = 0, staleness_p50 = 0, staleness_p99 = 0, staleness_max = 0;
};
AsyncReport report_async(const taskgraph::TaskGraph& g, const replay::Timeline& t, double samples_per_update);

// With stragglers (`scales`, `st`, `group` as for task_scales) the critical GPU named is the
// member of its tensor x context group that set the pace: the one whose draw or slowdown was the
// group's maximum, else the one with the slowest throttle during the step.
StepReport report_steps(const taskgraph::TaskGraph& g, const replay::Timeline& t, const std::vector<int>& step_of, int steps,
                        const replay::TaskScales* scales = nullptr, const StragglerSpec* st = nullptr, int group = 1);

}  // namespace dtsim::results
