// pipedream-2bw: PipeDream's flush-free 1F1B window (Narayanan et al. ICML 2021) with two weight
// versions, one update per step from gradients of the version before.
#include "strategies/schedule.hpp"

namespace dtsim::strategies::schedules {

namespace {

std::vector<PipeOp> passes(int p, int stage, int m, int v) { return Schedule::PipeDream->passes(p, stage, m, v); }

// None in the steady state.
double bubble(int, int, int) { return 0.0; }

// Two versions (2021, Sec. 3.1); the update uses gradients of the version before
// (W(t+1) = W(t) - lr grad f(W(t-1)), delay 1).
int weight_versions(int, int) { return 2; }
int staleness(int, int) { return 1; }

}  // namespace

const PipelineSchedule& pipedream_2bw() {
  static const PipelineSchedule s{.name = "pipedream-2bw",
                                  .passes = passes,
                                  .bubble = bubble,
                                  .weight_versions = weight_versions,
                                  .staleness = staleness,
                                  .no_flush = true,
                                  .with_experts = false};
  return s;
}

}  // namespace dtsim::strategies::schedules
