// 1f1b: PipeDream-Flush, stages - stage - 1 warm-up forwards, then one forward one backward
// (Narayanan et al. 2021).
#include <algorithm>

#include "strategies/schedule.hpp"

namespace dtsim::strategies::schedules {

namespace {

std::vector<PipeOp> passes(int p, int stage, int m, int) {
  std::vector<PipeOp> out;
  const int warmup = std::min(p - stage - 1, m);
  for (int mb = 0; mb < warmup; ++mb) out.push_back({mb, 0, true});
  for (int k = 0; k < m - warmup; ++k) {
    out.push_back({warmup + k, 0, true});
    out.push_back({k, 0, false});
  }
  for (int mb = m - warmup; mb < m; ++mb) out.push_back({mb, 0, false});
  return out;
}

// (p-1)/m (Narayanan et al. 2021, Sec. 2.2).
double bubble(int p, int m, int) { return (p - 1.0) / m; }

// min(p - stage, m) micro-batches in flight (Narayanan et al. 2021, Sec. 2.2).
std::optional<double> peak(int p, int stage, int m, const std::vector<double>& kept) {
  if (kept.size() != 1) return std::nullopt;
  return std::min(p - stage, m) * kept[0];
}

// After the first micro-batch's round trip, stage k runs m - 1 more backwards and the forwards
// its warm-up (min(p - k - 1, m - 1) of them) did not already run; the slowest stage sets the
// pace. For equal stages: (m + p - 1) micro-batch times.
double closed_form(const PipelinePrices& x) {
  double cycle = 0;
  for (int st = 0; st < x.stages; ++st) {
    const auto i = static_cast<std::size_t>(st);
    const double warm = std::min<double>(x.stages - st - 1, x.micro_batches - 1);
    cycle = std::max(cycle, (x.micro_batches - 1) * x.b[i] + (x.micro_batches - 1 - warm) * x.f[i]);
  }
  return x.sum + cycle + x.hops;
}

}  // namespace

const PipelineSchedule& one_f_one_b() {
  static const PipelineSchedule s{.name = "1f1b", .passes = passes, .bubble = bubble, .peak = peak, .closed_form = closed_form};
  return s;
}

}  // namespace dtsim::strategies::schedules
