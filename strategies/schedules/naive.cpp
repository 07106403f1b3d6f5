// naive: one micro-batch at a time through the whole pipeline, its forward then its backward, so
// every stage but one idles.
#include "strategies/schedule.hpp"

namespace dtsim::strategies::schedules {

namespace {

std::vector<PipeOp> passes(int, int, int m, int) {
  std::vector<PipeOp> out;
  for (int mb = 0; mb < m; ++mb) {
    out.push_back({mb, 0, true});
    out.push_back({mb, 0, false});
  }
  return out;
}

double bubble(int p, int, int) { return p - 1.0; }

}  // namespace

const PipelineSchedule& naive() {
  static const PipelineSchedule s{.name = "naive", .passes = passes, .bubble = bubble};
  return s;
}

}  // namespace dtsim::strategies::schedules
