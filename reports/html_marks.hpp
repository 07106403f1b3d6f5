#pragma once
// Marks around report.html's timeline (its legend, sampling note and <svg>), so that the explorer
// (dtsim serve's POST /api/timeline) shows the same picture without parsing the page's layout.
namespace dtsim::reports {

inline constexpr const char* kTimelineBegin = "<!-- dtsim:timeline -->";
inline constexpr const char* kTimelineEnd = "<!-- /dtsim:timeline -->";

}  // namespace dtsim::reports
