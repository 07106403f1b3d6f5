#include "sim/sweep/limits.hpp"

#include "sim/core/units.hpp"
#include "sim/sweep/candidates.hpp"
#include "sim/sweep/human.hpp"

namespace dtsim::sweep {

double headroom(const Candidate& c) { return c.capacity - c.peak; }

bool within(const Candidate& c, const Limits& l) {
  if (!c.fits) return false;
  if (l.max_days > 0 && c.time_to_train > l.max_days * 86400) return false;
  if (l.max_cost > 0 && c.cost > l.max_cost) return false;
  return !(l.min_headroom_gib > 0 && headroom(c) < l.min_headroom_gib * units::kGiB);
}

std::string outside_because(const Candidate& c, const Limits& l) {
  if (!c.fits) return "does not fit";
  if (l.max_days > 0 && c.time_to_train > l.max_days * 86400) return "over " + human_days(l.max_days * 86400);
  if (l.max_cost > 0 && c.cost > l.max_cost) return "over " + human_money(l.max_cost);
  if (l.min_headroom_gib > 0 && headroom(c) < l.min_headroom_gib * units::kGiB)
    return "headroom under " + human_gib(l.min_headroom_gib * units::kGiB);
  return "";
}

}  // namespace dtsim::sweep
