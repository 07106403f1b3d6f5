#include "sim/sweep/plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>

#include "sim/core/units.hpp"

namespace dtsim::sweep {

bool same_result(const Candidate& a, const Candidate& b) {
  return a.step == b.step && a.samples_per_s == b.samples_per_s && a.mfu == b.mfu && a.peak == b.peak &&
         a.fits == b.fits && a.price == b.price && a.cost_per_million_tokens == b.cost_per_million_tokens &&
         a.time_to_train == b.time_to_train && a.gpu_hours == b.gpu_hours && a.cost == b.cost &&
         a.energy_kwh == b.energy_kwh && a.replayed == b.replayed;
}

std::vector<const Candidate*> within_limits(const Outcome& out, const Limits& limits) {
  std::vector<const Candidate*> rows;
  for (const auto& c : out.ranked)
    if (within(c, limits)) rows.push_back(&c);
  return rows;
}

std::string outside_counts(const Outcome& out, const Limits& limits, std::size_t cluster) {
  std::map<std::string, int> counts;
  for (const auto& c : out.ranked)
    if (c.fits && (cluster == SIZE_MAX || c.cluster == cluster))
      if (auto why = outside_because(c, limits); !why.empty()) ++counts[why];
  std::vector<std::pair<std::string, int>> sorted(counts.begin(), counts.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string text;
  for (const auto& [why, n] : sorted) text += fmt::format("{}{} {}", text.empty() ? "" : ", ", n, why);
  return text;
}

namespace {

// Why no candidate of the cluster is within the limits.
std::string none_because(const Outcome& out, const Limits& limits, std::size_t cluster) {
  const auto& clusters = out.clusters;
  const bool any_valid = std::any_of(out.ranked.begin(), out.ranked.end(), [&](const Candidate& c) { return c.cluster == cluster; });
  if (!any_valid) return "no strategy could be laid out";
  const bool any_fits =
      std::any_of(out.ranked.begin(), out.ranked.end(), [&](const Candidate& c) { return c.cluster == cluster && c.fits; });
  if (!any_fits) return fmt::format("nothing fits in {:.0f} GiB per GPU", clusters[cluster].base.device.memory_bytes / units::kGiB);
  return "none within the limits: " + outside_counts(out, limits, cluster);
}

}  // namespace

std::vector<PlanRow> plan_rows(const Outcome& out, const Limits& limits, int per_cluster) {
  std::vector<std::vector<PlanRow>> by_cluster(out.clusters.size());
  for (const auto& c : out.ranked) {
    if (!within(c, limits)) continue;
    auto& rows = by_cluster[c.cluster];
    auto same = std::find_if(rows.begin(), rows.end(), [&](const PlanRow& r) { return same_result(*r.best, c); });
    if (same != rows.end()) same->folded.push_back(describe(c));
    else if (rows.size() < static_cast<std::size_t>(per_cluster))
      rows.push_back({c.cluster, static_cast<int>(rows.size()) + 1, &c, {}, ""});
  }
  std::vector<PlanRow> all;
  for (std::size_t ci = 0; ci < by_cluster.size(); ++ci) {
    if (by_cluster[ci].empty()) all.push_back({ci, 0, nullptr, {}, none_because(out, limits, ci)});
    for (auto& r : by_cluster[ci]) all.push_back(std::move(r));
  }
  return all;
}

}  // namespace dtsim::sweep
