#pragma once
// One palette for every picture of a result: report.html, the compare view and the explorer page
// (dtsim serve) colour each part of the step and of memory alike, so a colour means one cause.
#include <vector>

namespace dtsim::reports::palette {

struct Part {
  const char* key;     // as result.json names it (breakdown_s.KEY, memory.KEY_bytes)
  const char* label;   // as the pages write it
  const char* colour;
};

// The parts of the step, in the order the pages draw them; they add up to the step time.
inline constexpr Part kStep[] = {{"compute", "compute", "#1f77b4"},
                                 {"exposed_communication", "exposed communication", "#d62728"},
                                 {"pipeline_bubble", "pipeline bubble", "#bbbbbb"},
                                 {"stage_imbalance", "stage imbalance", "#bcbd22"},
                                 {"optimizer", "optimizer", "#2ca02c"},
                                 {"straggler_wait", "straggler wait", "#ff7f0e"},
                                 {"input_stall", "input stall", "#8c564b"},
                                 {"checkpoint", "checkpoint", "#9467bd"},
                                 {"comm_interference", "communication interference", "#e377c2"}};

// The parts of a GPU's memory.
inline constexpr Part kMemory[] = {{"params", "parameters", "#1f77b4"},
                                   {"gradients", "gradients", "#6baed6"},
                                   {"optimizer", "optimizer", "#2ca02c"},
                                   {"activations", "activations", "#ff7f0e"},
                                   {"other", "other", "#bbbbbb"}};

template <std::size_t N>
std::vector<const char*> colours(const Part (&parts)[N]) {
  std::vector<const char*> out;
  for (const auto& p : parts) out.push_back(p.colour);
  return out;
}

}  // namespace dtsim::reports::palette
