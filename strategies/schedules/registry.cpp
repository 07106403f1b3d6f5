#include "strategies/schedule.hpp"

// Every pipeline schedule, one line each, in the order `dtsim describe` lists them. A schedule's
// place here is its Schedule value (the constants in strategies/schedule.hpp name the first
// seven); each line names the function in the schedule's own file that describes it.
#define DTSIM_SCHEDULES(X) \
  X(naive)                 \
  X(gpipe)                 \
  X(one_f_one_b)           \
  X(interleaved_1f1b)      \
  X(pipedream)             \
  X(pipedream_2bw)         \
  X(zero_bubble_h1)

namespace dtsim::strategies {

namespace schedules {
#define DTSIM_DECLARE(schedule) const PipelineSchedule& schedule();
DTSIM_SCHEDULES(DTSIM_DECLARE)
#undef DTSIM_DECLARE
}  // namespace schedules

const std::vector<const PipelineSchedule*>& schedule_registry() {
#define DTSIM_ENTRY(schedule) &schedules::schedule(),
  static const std::vector<const PipelineSchedule*> all{DTSIM_SCHEDULES(DTSIM_ENTRY)};
#undef DTSIM_ENTRY
  return all;
}

}  // namespace dtsim::strategies
