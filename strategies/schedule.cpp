#include "strategies/schedule.hpp"

#include <algorithm>
#include <cmath>

#include "strategies/settings.hpp"

namespace dtsim::strategies {

const PipelineSchedule* Schedule::operator->() const { return schedule_registry()[index_]; }

std::vector<Schedule> all_schedules() {
  std::vector<Schedule> out;
  for (std::size_t i = 0; i < schedule_registry().size(); ++i) out.emplace_back(static_cast<std::uint8_t>(i));
  return out;
}

const char* to_string(Schedule s) { return s->name; }

std::vector<std::string> schedule_names() {
  std::vector<std::string> out;
  for (const auto* s : schedule_registry()) out.emplace_back(s->name);
  return out;
}

std::optional<Schedule> schedule_from_string(const std::string& name) {
  for (Schedule s : all_schedules())
    if (name == s->name) return s;
  return std::nullopt;
}

std::vector<PipeOp> stage_schedule(Schedule s, int p, int stage, int m, int v) { return s->passes(p, stage, m, v); }

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

}  // namespace

std::optional<double> peak_in_flight(Schedule s, int p, int stage, int m, const std::vector<double>& kept) {
  const int v = static_cast<int>(kept.size());
  if (v < 1 || m < 0 || !sums_exact(kept, static_cast<double>(m) * v) || !s->peak) return std::nullopt;
  return s->peak(p, stage, m, kept);
}

double bubble_fraction(Schedule s, int p, int m, int v) { return s->bubble(p, m, v); }

double bubble_share(Schedule s, int p, int m, int v) {
  const double over_compute = bubble_fraction(s, p, m, v);
  return over_compute / (1.0 + over_compute);
}

int weight_versions(Schedule s, int p, int stage) { return s->weight_versions ? s->weight_versions(p, stage) : 1; }

int weight_staleness(Schedule s, int p, int stage) { return s->staleness ? s->staleness(p, stage) : 0; }

bool asynchronous(Schedule s) { return s->no_flush; }

}  // namespace dtsim::strategies
