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
// task of the step before. step_of[i] gives task i's step.
taskgraph::TaskGraph repeat_steps(const taskgraph::TaskGraph& one, int steps, std::vector<int>& step_of);

// A duration multiplier per task: one draw per (GPU, step) applied to all its compute tasks, so a
// GPU is slow for a whole step (throttling, noisy neighbour), as the expected-maximum closed form
// assumes. Draws happen in (step, GPU) order from one seeded generator.
std::vector<double> task_scales(const taskgraph::TaskGraph& g, const std::vector<int>& step_of, int steps,
                                const StragglerSpec& s);

struct StepReport {
  std::vector<double> step_times;
  double mean = 0, p50 = 0, p99 = 0, max = 0;
  std::vector<std::pair<int, int>> critical;  // GPU, steps its backward ended last
  double mean_wait_s = 0, max_wait_s = 0;     // per GPU and step: idle between its backward and its optimizer
  int max_wait_gpu = -1;
};
StepReport report_steps(const taskgraph::TaskGraph& g, const replay::Timeline& t, const std::vector<int>& step_of, int steps);

}  // namespace dtsim::results
