#include "strategies/schedule.hpp"

#include <algorithm>
#include <stdexcept>

namespace dtsim::strategies {

const char* to_string(Schedule s) {
  switch (s) {
    case Schedule::Naive: return "naive";
    case Schedule::GPipe: return "gpipe";
    case Schedule::OneFOneB: return "1f1b";
    case Schedule::Interleaved: return "interleaved-1f1b";
  }
  return "?";
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
  }
  return out;
}

double bubble_fraction(Schedule s, int p, int m, int v) {
  switch (s) {
    case Schedule::Naive: return p - 1.0;
    case Schedule::GPipe:
    case Schedule::OneFOneB: return (p - 1.0) / m;
    case Schedule::Interleaved: return (p - 1.0) / (static_cast<double>(v) * m);
  }
  return 0;
}

}  // namespace dtsim::strategies
