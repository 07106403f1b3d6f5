#pragma once
// What a calibration read, fitted and kept, as calibration.txt and calibration.json: every row's
// measured and predicted time before and after, its relative error, the RMS of those errors, and
// for each profile value its base, its fitted value or why it was kept. Numbers are printed to a
// fixed number of significant digits, so the same inputs give the same bytes.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sim/calibrate/kernel_fit.hpp"
#include "sim/calibrate/nccl_fit.hpp"
#include "sim/calibrate/step_log.hpp"
#include "sim/calibrate/trace_parse.hpp"

namespace dtsim::calibrate {

// The per-kernel host dispatch the trace measured, beside a stack preset's (sim/cost/stack.cpp).
struct DispatchCompare {
  std::string stack;
  double preset_us = 0;
};

struct Calibration {
  std::string base_device, base_cluster;  // the files, or "" when not given
  std::vector<NcclTestsFile> nccl;
  std::optional<CollectiveFit> collectives;
  std::vector<std::string> kernel_files;
  std::optional<KernelFit> kernels;
  std::string trace_file;
  std::optional<TraceSummary> trace;
  std::optional<DispatchCompare> dispatch;
  std::optional<StepComparison> steps;
  std::vector<std::string> written;  // the profiles written, as named on the command line
};

// Root mean square of predicted / measured - 1 over the pairs.
double rms_relative(const std::vector<std::pair<double, double>>& predicted_measured);

nlohmann::ordered_json report_json(const Calibration& c);
std::string report_text(const Calibration& c);

}  // namespace dtsim::calibrate
