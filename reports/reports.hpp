#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/results/result.hpp"

namespace dtsim::reports {

// "data 2 x context 2 x tensor 4 x pipeline 4": every dimension the GPUs are split along.
std::string parallel_dimensions(const strategies::ParallelismSpec& p);
// "DOES NOT FIT: GPU 3 needs 95.10 GiB, the device has 80.00 GiB (15.10 GiB, 19% over)".
std::string does_not_fit(const results::Result& r);
// The human-readable summary `run` and `memory` print.
std::string summary(const results::Result& r);
// `run --kernels`: the breakdown's rank's kernel time in one step, by what each kernel is for
// (results::kernel_view), as the device and the stack price it.
std::string kernel_table(const results::Result& r);

// Chrome trace (chrome://tracing, Perfetto): one process per rank, with tracks (threads) for
// compute, communication and the data loader. Slices that overlap in time on one of them (kernels
// or collectives in flight at once) go to extra tracks ("compute 2", ...), so no track holds two
// partially overlapping slices. Each slice's args give its FLOPs and bytes, and for collectives
// the operation, algorithm, group and link. Only the first `max_ranks` ranks are written; big
// runs would be unreadable.
nlohmann::json chrome_trace(const results::Result& r, int max_ranks = 64);

// A self-contained HTML page: breakdown bar, timeline of the simulated GPUs, memory bars.
std::string html_report(const results::Result& r);

// How much each compared metric may worsen, as a share (0.02 = 2 %), keyed by JSON pointer
// ("/memory/peak_bytes"). A metric not in `by_pointer` gets `fallback` when that is >= 0 (an
// explicit --rel-tol), else its own default (metric_defaults()).
struct Tolerances {
  double fallback = -1;
  std::map<std::string, double> by_pointer;
  double of(const std::string& pointer) const;
};
// The metrics compare() knows, as `--metric` names them ("memory.peak_bytes"), with each one's
// default tolerance. Timing is deterministic but moves with small model changes; memory moves in
// steps (a buffer more or less), so it gets a wider default.
struct MetricInfo {
  std::string name, pointer;
  bool higher_is_worse, compared_by_default;
  double default_tolerance;
};
const std::vector<MetricInfo>& known_metrics();
// "step_time_s=0.02" (or "/memory/peak_bytes=0.05") into `t`; InputError naming --metric, with a
// "did you mean" for a misspelt metric.
void add_metric_tolerance(Tolerances& t, const std::string& arg);

struct MetricResult {
  std::string name, pointer;
  double baseline = 0, candidate = 0, change = 0, tolerance = 0;  // change: (candidate - baseline) / baseline
  bool is_flag = false;  // /memory/fits: baseline and candidate are 0 or 1
  bool regression = false;
};
struct Comparison {
  std::vector<std::string> lines;  // one per metric compared
  std::vector<MetricResult> metrics;  // the same, as data (--format json, junit)
  bool regression = false;
};
// Candidate vs baseline result.json: slower step, lower throughput, more memory beyond each
// metric's tolerance, or a plan that stopped fitting, is a regression.
Comparison compare(const nlohmann::json& baseline, const nlohmann::json& candidate, const Tolerances& tol);
// `compare --format json`: the verdict and every metric's numbers.
nlohmann::ordered_json comparison_json(const Comparison& c, const std::string& baseline_file, const std::string& candidate_file);
// `compare --format junit`: one testcase per metric, a <failure> for each regression (JUnit XML
// as GitHub Actions, GitLab and Jenkins read it).
std::string comparison_junit(const Comparison& c, const std::string& baseline_file, const std::string& candidate_file);
// InputError (naming `file` and the pointer) unless `j` is a result of `dtsim run`: an object with
// step_time_s, every compared metric a finite number.
void check_result(const nlohmann::json& j, const std::string& file);
// Where two results describe different runs: the scenario's name, the model or the parallel
// layout; for each, the first differing value.
struct Difference {
  std::string pointer, baseline, candidate;  // values as JSON text
};
std::vector<Difference> scenario_differences(const nlohmann::json& baseline, const nlohmann::json& candidate);

// `compare --html`: a self-contained page with two results side by side (GPipe vs 1F1B, ring vs
// parameter server): the compared metrics, each one's step breakdown on one time scale, and its
// memory against the device's capacity. `baseline_name` and `candidate_name` label the columns.
// `*_timeline`, when not empty, is a link (relative to the page) to that run's report.html.
std::string html_compare(const nlohmann::json& baseline, const nlohmann::json& candidate, const std::string& baseline_name,
                         const std::string& candidate_name, const Tolerances& tol, const std::string& baseline_timeline = "",
                         const std::string& candidate_timeline = "");

}  // namespace dtsim::reports
