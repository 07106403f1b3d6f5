// gpipe: all forwards, then all backwards (Huang et al. 2019).
#include "strategies/schedule.hpp"

namespace dtsim::strategies::schedules {

namespace {

std::vector<PipeOp> passes(int, int, int m, int) {
  std::vector<PipeOp> out;
  for (int mb = 0; mb < m; ++mb) out.push_back({mb, 0, true});
  for (int mb = m - 1; mb >= 0; --mb) out.push_back({mb, 0, false});
  return out;
}

// (p-1)/m (Narayanan et al. 2021, Sec. 2.2).
double bubble(int p, int m, int) { return (p - 1.0) / m; }

// Every stage holds all m micro-batches.
std::optional<double> peak(int, int, int m, const std::vector<double>& kept) {
  if (kept.size() != 1) return std::nullopt;
  return m * kept[0];
}

// The slowest stage's forwards and backwards of every micro-batch but the first after the first
// one's round trip.
double closed_form(const PipelinePrices& x) { return x.sum + (x.micro_batches - 1) * (x.worst_f + x.worst_b) + x.hops; }

}  // namespace

const PipelineSchedule& gpipe() {
  static const PipelineSchedule s{.name = "gpipe",
                                  .passes = passes,
                                  .bubble = bubble,
                                  .peak = peak,
                                  .closed_form = closed_form,
                                  .forwards_before_backwards = true};
  return s;
}

}  // namespace dtsim::strategies::schedules
