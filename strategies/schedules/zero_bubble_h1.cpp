// zero-bubble-h1: ZB-H1 (Qi et al. ICLR 2024, Sec. 3.1): 1F1B's warm-up, each backward split into
// B then W, stage s deferring its W passes by s micro-batches so they fill the drain; at most p
// micro-batches in flight on any stage, as 1F1B's first stage.
#include <algorithm>

#include "strategies/schedule.hpp"

namespace dtsim::strategies {

double zero_bubble_h1_fraction(int p, int m, double tf, double tb, double tw) {
  return (p - 1.0) * (tf + tb - tw) / (m * (tf + tb + tw));
}

namespace schedules {

namespace {

// Stage s runs W(k) after B(k + s), so it holds at most p micro-batches' activations (those not
// yet through W), as 1F1B's stage 0.
std::vector<PipeOp> passes(int p, int stage, int m, int) {
  using Part = PipeOp::Part;
  const int warmup = std::min(p - stage - 1, m);
  std::vector<PipeOp> out;
  int next_w = 0;
  auto weight_upto = [&](int k) {  // W passes up to micro-batch k
    for (; next_w <= k; ++next_w) out.push_back({next_w, 0, false, Part::Weight});
  };
  for (int mb = 0; mb < warmup; ++mb) out.push_back({mb, 0, true});
  for (int k = 0; k < m; ++k) {
    if (warmup + k < m) out.push_back({warmup + k, 0, true});
    out.push_back({k, 0, false, Part::Input});
    weight_upto(k - stage);
  }
  weight_upto(m - 1);
  return out;
}

// (p-1)(F+B-W)/(m(F+B+W)) with equal F, B and W passes, i.e. (p-1)/(3m).
double bubble(int p, int m, int) { return zero_bubble_h1_fraction(p, m, 1.0, 1.0, 1.0); }

}  // namespace

const PipelineSchedule& zero_bubble_h1() {
  static const PipelineSchedule s{
      .name = "zero-bubble-h1", .passes = passes, .bubble = bubble, .splits_backward = true, .with_experts = false};
  return s;
}

}  // namespace schedules

}  // namespace dtsim::strategies
