#pragma once
// The planner's limits on a sweep's answer (`--max-days`, `--max-cost`, `--min-headroom`): a
// candidate within them ranks above every one outside them, as one that fits ranks above one
// that does not (a sweep without limits ranks exactly as before).
#include <string>

namespace dtsim::sweep {

struct Candidate;

struct Limits {
  double max_days = 0;          // the whole run's time to train, days; 0: no limit
  double max_cost = 0;          // the whole run's cost, USD; 0: no limit
  double min_headroom_gib = 0;  // device memory left free under the peak, GiB; 0: fitting is enough
  bool any() const { return max_days > 0 || max_cost > 0 || min_headroom_gib > 0; }
  // The limits that need the scenario's training length (time and cost to train).
  bool need_length() const { return max_days > 0 || max_cost > 0; }
};

// Memory left free on the device under the candidate's peak, bytes (negative: it does not fit).
double headroom(const Candidate& c);
// Fits, and within every limit set.
bool within(const Candidate& c, const Limits& l);
// Why a candidate is outside the limits, for people: "does not fit", "over 30 days", "over $2 M",
// "headroom under 4 GiB"; "" when it is within them.
std::string outside_because(const Candidate& c, const Limits& l);

}  // namespace dtsim::sweep
