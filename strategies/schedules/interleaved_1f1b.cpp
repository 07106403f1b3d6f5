// interleaved-1f1b: Megatron's interleaved 1F1B over `chunks` model chunks per stage (needs
// micro-batches to be a multiple of stages); with one chunk, 1F1B.
#include <algorithm>
#include <stdexcept>

#include "strategies/schedule.hpp"

namespace dtsim::strategies::schedules {

namespace {

std::vector<PipeOp> interleaved(int p, int stage, int m, int v) {
  if (m % p != 0) throw std::invalid_argument("interleaved 1F1B needs micro-batches to be a multiple of stages");
  const int total = m * v;
  // Megatron-LM schedules.py: the k-th virtual micro-batch of a stage.
  auto op = [&](int k, bool fwd) {
    int chunk = (k / p) % v;
    if (!fwd) chunk = v - 1 - chunk;
    return PipeOp{(k / (p * v)) * p + k % p, chunk, fwd};
  };
  int warmup = std::min(total, (p - stage - 1) * 2 + (v - 1) * p);
  std::vector<PipeOp> out;
  out.reserve(static_cast<std::size_t>(2 * total));
  for (int k = 0; k < warmup; ++k) out.push_back(op(k, true));
  for (int k = 0; k < total - warmup; ++k) {
    out.push_back(op(warmup + k, true));
    out.push_back(op(k, false));
  }
  for (int k = total - warmup; k < total; ++k) out.push_back(op(k, false));
  return out;
}

std::vector<PipeOp> passes(int p, int stage, int m, int v) {
  return v == 1 ? Schedule::OneFOneB->passes(p, stage, m, 1) : interleaved(p, stage, m, v);
}

// (p-1)/(v m) (Narayanan et al. 2021, Sec. 2.2).
double bubble(int p, int m, int v) { return (p - 1.0) / (static_cast<double>(v) * m); }

// The order interleaved() emits: the k-th forward runs chunk (k / p) % v, the k-th backward
// chunk v - 1 - (k / p) % v. After the k-th steady backward a stage holds the first W + k + 1
// forwards less the first k backwards, which repeats every p v passes.
double interleaved_peak(int p, int stage, int m, const std::vector<double>& kept) {
  const int v = static_cast<int>(kept.size()), total = m * v;
  const int warmup = std::min(total, (p - stage - 1) * 2 + (v - 1) * p);
  double round = 0;  // one round of p v passes
  for (double a : kept) round += p * a;
  auto sum = [&](int n, bool backward) {  // of the first n forwards or backwards
    double out = (n / (p * v)) * round;
    const int q = (n % (p * v)) / p, rest = n % p;
    for (int c = 0; c < q; ++c) out += p * kept[static_cast<std::size_t>(backward ? v - 1 - c : c)];
    return out + rest * kept[static_cast<std::size_t>(backward ? v - 1 - q : q)];
  };
  double peak = sum(warmup, false);
  for (int k = 0; k < std::min(total - warmup, p * v); ++k) peak = std::max(peak, sum(warmup + k + 1, false) - sum(k, true));
  return peak;
}

std::optional<double> peak(int p, int stage, int m, const std::vector<double>& kept) {
  if (kept.size() == 1) return Schedule::OneFOneB->peak(p, stage, m, kept);
  if (m % p != 0) return std::nullopt;  // refused by the walk's schedule
  return interleaved_peak(p, stage, m, kept);
}

// The fill and the drain pass through each stage's first chunk (chunks 0..p-1): for equal
// chunks (p - 1)/v micro-batch times.
double closed_form(const PipelinePrices& x) {
  double first = 0, first_worst = 0;
  for (int j = 0; j < x.stages; ++j) {
    first += x.F[static_cast<std::size_t>(j)] + x.B[static_cast<std::size_t>(j)];
    first_worst = std::max(first_worst, x.F[static_cast<std::size_t>(j)] + x.B[static_cast<std::size_t>(j)]);
  }
  return x.micro_batches * x.worst + first - first_worst + x.hops;
}

}  // namespace

const PipelineSchedule& interleaved_1f1b() {
  static const PipelineSchedule s{.name = "interleaved-1f1b",
                                  .passes = passes,
                                  .bubble = bubble,
                                  .peak = peak,
                                  .closed_form = closed_form,
                                  .chunked = true};
  return s;
}

}  // namespace dtsim::strategies::schedules
