// pipedream: 1F1B without a flush (Narayanan et al. SOSP 2019), each backward updating its
// stage's weights. A step is one window of m forwards and m backwards of each stage's endless
// stream: stage s runs F(j) then the backward of the micro-batch p - s - 1 before it, the first
// ones being the previous step's (previous_step). Needs micro_batches >= stages.
#include <stdexcept>

#include "strategies/schedule.hpp"

namespace dtsim::strategies::schedules {

namespace {

// The endless stream of stage s is p - s - 1 warm-up forwards, then F(w + i), B(i) for i = 0, 1,
// ...; the window holding this step's m forwards pairs F(j) with B(j - w), the first w backwards
// being the previous step's last micro-batches.
std::vector<PipeOp> passes(int p, int stage, int m, int) {
  if (m < p) throw std::invalid_argument("pipedream schedules need at least as many micro-batches as stages");
  const int w = p - stage - 1;
  std::vector<PipeOp> out;
  for (int j = 0; j < m; ++j) {
    out.push_back({j, 0, true});
    PipeOp b{j - w, 0, false};
    if (b.micro_batch < 0) {
      b.micro_batch += m;
      b.previous_step = true;
    }
    out.push_back(b);
  }
  return out;
}

// None in the steady state.
double bubble(int, int, int) { return 0.0; }

// One stashed version per micro-batch in flight (Narayanan et al. 2019, Sec. 3.3).
int weight_versions(int p, int stage) { return p - stage; }
// Stage s computes its gradient on weights missing the p - s - 1 micro-batches still in flight
// ahead of it.
int staleness(int p, int stage) { return p - stage - 1; }

}  // namespace

const PipelineSchedule& pipedream() {
  static const PipelineSchedule s{.name = "pipedream",
                                  .passes = passes,
                                  .bubble = bubble,
                                  .weight_versions = weight_versions,
                                  .staleness = staleness,
                                  .no_flush = true,
                                  .updates_per_backward = true,
                                  .with_experts = false};
  return s;
}

}  // namespace dtsim::strategies::schedules
