#include <algorithm>

#include "reports/reports.hpp"

namespace dtsim::reports {

nlohmann::json chrome_trace(const results::Result& r, int max_ranks) {
  const auto& g = r.replayed();
  const auto& t = r.timeline;
  nlohmann::json events = nlohmann::json::array();
  // GPUs that run tasks (one per pipeline stage of the first replica), up to max_ranks of them.
  std::vector<int> shown;
  for (const auto& task : g.tasks)
    if (!task.is_collective && std::find(shown.begin(), shown.end(), task.rank) == shown.end() &&
        static_cast<int>(shown.size()) < max_ranks)
      shown.push_back(task.rank);
  auto visible = [&](int rank) { return std::find(shown.begin(), shown.end(), rank) != shown.end(); };
  for (int rank : shown) {
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", rank}, {"args", {{"name", "rank " + std::to_string(rank)}}}});
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank}, {"tid", 0}, {"args", {{"name", "compute"}}}});
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank}, {"tid", 1}, {"args", {{"name", "communication"}}}});
  }
  auto add = [&](std::size_t i, int rank, int tid) {
    events.push_back({{"name", g.tasks[i].label},
                      {"cat", taskgraph::to_string(g.tasks[i].category)},
                      {"ph", "X"},
                      {"pid", rank},
                      {"tid", tid},
                      {"ts", t.start[i] * 1e6},
                      {"dur", (t.end[i] - t.start[i]) * 1e6}});
  };
  for (std::size_t i = 0; i < g.tasks.size(); ++i) {
    const auto& task = g.tasks[i];
    if (!task.is_collective) {
      if (visible(task.rank)) add(i, task.rank, 0);
      continue;
    }
    for (int group : task.collective.groups)
      for (int rank : g.groups[static_cast<std::size_t>(group)])
        if (visible(rank)) add(i, rank, 1);
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

}  // namespace dtsim::reports
