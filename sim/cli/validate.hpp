#pragma once
// `dtsim validate`: one row per scenario with a published "reference", run in a child process
// (validate.cpp), then summarised by row, group and ranking set (validate_report.cpp).
#include <string>
#include <vector>

#include "sim/config/scenario.hpp"

namespace dtsim::cli {

struct ValidationRow {
  std::string file, name;
  config::Reference ref;
  int gpus = 0;
  double predicted_s = 0;
  double predicted_memory_bytes = 0;  // the reading the reference names; 0 when it names none
  std::string failure;
  double error_percent() const { return 100.0 * (predicted_s / ref.step_time_s - 1.0); }
  double memory_error_percent() const { return 100.0 * (predicted_memory_bytes / ref.peak_memory_bytes - 1.0); }
  bool has_memory() const { return ref.peak_memory_bytes > 0 && failure.empty(); }
};

struct ValidationSummary {
  double mean_abs_error = 0, max_abs_error = 0;
  int rows = 0, failed = 0, outside_tolerance = 0;
};

// Prints the table, the groups and the rankings; writes `json_out` when not empty.
ValidationSummary report_validation(const std::vector<ValidationRow>& rows, const std::string& json_out, bool suite);

}  // namespace dtsim::cli
