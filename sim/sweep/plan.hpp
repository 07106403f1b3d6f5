#pragma once
// The planner's answer (`sweep --by-cluster`): for each cluster size and device, its best
// strategies within the limits, each with the strategies whose priced result is identical
// folded into it (under flash attention `recompute=selective` often prices exactly as none).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sim/sweep/search.hpp"

namespace dtsim::sweep {

struct PlanRow {
  std::size_t cluster = 0;
  int rank = 0;                       // among its cluster's rows, from 1; 0: the cluster has none
  const Candidate* best = nullptr;    // into the outcome's ranking; nullptr: none within the limits
  std::vector<std::string> folded;    // the strategies priced identically, in rank order
  std::string none_because;           // when best is nullptr: "nothing fits in 80 GiB", ...
};

// Every priced number the row shows is the same (and both were priced the same way).
bool same_result(const Candidate& a, const Candidate& b);
// Up to `per_cluster` rows per cluster, clusters in the sweep's order (GPU counts, then devices),
// each cluster's rows best first; a cluster without a candidate within the limits gets one row
// saying why.
std::vector<PlanRow> plan_rows(const Outcome& out, const Limits& limits, int per_cluster);
// The candidates of the ranking within the limits, best first (what the plain table shows when
// limits are set).
std::vector<const Candidate*> within_limits(const Outcome& out, const Limits& limits);
// "12 over 30 days, 3 headroom under 4 GiB": why the fitting candidates outside the limits are,
// most common first; "" when none is.
std::string outside_counts(const Outcome& out, const Limits& limits, std::size_t cluster = SIZE_MAX);

}  // namespace dtsim::sweep
