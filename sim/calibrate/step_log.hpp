#pragma once
// Measured step times, in either of two documented forms (docs/calibrate.md):
//   key-value lines:  step 12 time_s 0.512     (time_ms also; other "key value" pairs ignored)
//   a CSV:            step,time_s  (or time_ms) with one row per step
// compared with dtsim's prediction for a scenario. Nothing is fitted to them: a step time is one
// number that every parameter moves, so it cannot say which parameter is off.
#include <string>
#include <vector>

namespace dtsim::calibrate {

struct StepTime {
  int line = 0;
  long long step = 0;
  double seconds = 0;
};

// InputError naming the file and line of a line that is not a step, a step given twice, or a
// file without steps.
std::vector<StepTime> read_step_log(const std::string& path);

struct StepComparison {
  std::string log, scenario;
  int steps = 0;
  double median_s = 0, mean_s = 0, min_s = 0, max_s = 0;
  double predicted_s = 0;
  double error = 0;  // predicted / median - 1
};
StepComparison compare_steps(const std::string& log, const std::vector<StepTime>& steps, const std::string& scenario,
                             double predicted_s);

}  // namespace dtsim::calibrate
