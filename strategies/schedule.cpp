#include "strategies/schedule.hpp"
#include "strategies/settings.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace dtsim::strategies {

const char* to_string(Schedule s) {
  switch (s) {
    case Schedule::Naive: return "naive";
    case Schedule::GPipe: return "gpipe";
    case Schedule::OneFOneB: return "1f1b";
    case Schedule::Interleaved: return "interleaved-1f1b";
    case Schedule::PipeDream: return "pipedream";
    case Schedule::PipeDream2BW: return "pipedream-2bw";
    case Schedule::ZeroBubbleH1: return "zero-bubble-h1";
  }
  return "?";
}

std::vector<std::string> schedule_names() {
  std::vector<std::string> out;
  for (Schedule s : {Schedule::Naive, Schedule::GPipe, Schedule::OneFOneB, Schedule::Interleaved, Schedule::PipeDream,
                     Schedule::PipeDream2BW, Schedule::ZeroBubbleH1})
    out.emplace_back(to_string(s));
  return out;
}

std::optional<Schedule> schedule_from_string(const std::string& name) {
  for (Schedule s : {Schedule::Naive, Schedule::GPipe, Schedule::OneFOneB, Schedule::Interleaved, Schedule::PipeDream,
                     Schedule::PipeDream2BW, Schedule::ZeroBubbleH1})
    if (name == to_string(s)) return s;
  return std::nullopt;
}

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

// One window of PipeDream's flush-free 1F1B stream. The endless stream of stage s is p - s - 1
// warm-up forwards, then F(w + i), B(i) for i = 0, 1, ...; the window holding this step's m
// forwards pairs F(j) with B(j - w), the first w backwards being the previous step's last
// micro-batches.
std::vector<PipeOp> no_flush(int p, int stage, int m) {
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

// ZB-H1: 1F1B with each backward split into B and W, stage s running W(k) after B(k + s), so
// it holds at most p micro-batches' activations (those not yet through W), as 1F1B's stage 0.
std::vector<PipeOp> zero_bubble_h1(int p, int stage, int m) {
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

}  // namespace

std::vector<PipeOp> stage_schedule(Schedule s, int p, int stage, int m, int v) {
  std::vector<PipeOp> out;
  switch (s) {
    case Schedule::Naive:
      for (int mb = 0; mb < m; ++mb) {
        out.push_back({mb, 0, true});
        out.push_back({mb, 0, false});
      }
      break;
    case Schedule::GPipe:
      for (int mb = 0; mb < m; ++mb) out.push_back({mb, 0, true});
      for (int mb = m - 1; mb >= 0; --mb) out.push_back({mb, 0, false});
      break;
    case Schedule::OneFOneB: {
      int warmup = std::min(p - stage - 1, m);
      for (int mb = 0; mb < warmup; ++mb) out.push_back({mb, 0, true});
      for (int k = 0; k < m - warmup; ++k) {
        out.push_back({warmup + k, 0, true});
        out.push_back({k, 0, false});
      }
      for (int mb = m - warmup; mb < m; ++mb) out.push_back({mb, 0, false});
      break;
    }
    case Schedule::Interleaved:
      return v == 1 ? stage_schedule(Schedule::OneFOneB, p, stage, m, 1) : interleaved(p, stage, m, v);
    case Schedule::PipeDream:
    case Schedule::PipeDream2BW: return no_flush(p, stage, m);
    case Schedule::ZeroBubbleH1: return zero_bubble_h1(p, stage, m);
  }
  return out;
}

namespace {

// Whether sums of up to n of these values, in any order, are exact in doubles.
bool sums_exact(const std::vector<double>& kept, double n) {
  double most = 0;
  for (double a : kept) {
    if (!(a >= 0) || std::floor(a) != a) return false;
    most = std::max(most, a);
  }
  return most * n <= 9007199254740992.0;  // 2^53
}

// Interleaved 1F1B (the order interleaved() emits): the k-th forward runs chunk (k / p) % v, the
// k-th backward chunk v - 1 - (k / p) % v; sums of the first n of each.
double interleaved_peak(int p, int stage, int m, const std::vector<double>& kept) {
  const int v = static_cast<int>(kept.size()), total = m * v;
  const int warmup = std::min(total, (p - stage - 1) * 2 + (v - 1) * p);
  double round = 0;  // one round of p v passes
  for (double a : kept) round += p * a;
  auto sum = [&](int n, bool backward) {
    double out = (n / (p * v)) * round;
    const int q = (n % (p * v)) / p, rest = n % p;
    for (int c = 0; c < q; ++c) out += p * kept[static_cast<std::size_t>(backward ? v - 1 - c : c)];
    return out + rest * kept[static_cast<std::size_t>(backward ? v - 1 - q : q)];
  };
  double peak = sum(warmup, false);
  for (int k = 0; k < std::min(total - warmup, p * v); ++k) peak = std::max(peak, sum(warmup + k + 1, false) - sum(k, true));
  return peak;
}

}  // namespace

std::optional<double> peak_in_flight(Schedule s, int p, int stage, int m, const std::vector<double>& kept) {
  const int v = static_cast<int>(kept.size());
  if (v < 1 || m < 0 || !sums_exact(kept, static_cast<double>(m) * v)) return std::nullopt;
  if (s == Schedule::Interleaved && v > 1) {
    if (m % p != 0) return std::nullopt;  // refused by the walk's schedule
    return interleaved_peak(p, stage, m, kept);
  }
  if (v != 1) return std::nullopt;
  if (s == Schedule::GPipe) return m * kept[0];
  if (s == Schedule::OneFOneB || s == Schedule::Interleaved) return std::min(p - stage, m) * kept[0];
  return std::nullopt;
}

double bubble_fraction(Schedule s, int p, int m, int v) {
  switch (s) {
    case Schedule::Naive: return p - 1.0;
    case Schedule::GPipe:
    case Schedule::OneFOneB: return (p - 1.0) / m;
    case Schedule::Interleaved: return (p - 1.0) / (static_cast<double>(v) * m);
    case Schedule::PipeDream:
    case Schedule::PipeDream2BW: return 0.0;
    case Schedule::ZeroBubbleH1: return zero_bubble_h1_fraction(p, m, 1.0, 1.0, 1.0);
  }
  return 0;
}

double bubble_share(Schedule s, int p, int m, int v) {
  const double over_compute = bubble_fraction(s, p, m, v);
  return over_compute / (1.0 + over_compute);
}

double zero_bubble_h1_fraction(int p, int m, double tf, double tb, double tw) {
  return (p - 1.0) * (tf + tb - tw) / (m * (tf + tb + tw));
}

int weight_versions(Schedule s, int p, int stage) {
  return s == Schedule::PipeDream ? p - stage : s == Schedule::PipeDream2BW ? 2 : 1;
}

int weight_staleness(Schedule s, int p, int stage) {
  return s == Schedule::PipeDream ? p - stage - 1 : s == Schedule::PipeDream2BW ? 1 : 0;
}

bool asynchronous(Schedule s) { return s == Schedule::PipeDream || s == Schedule::PipeDream2BW; }

}  // namespace dtsim::strategies
