#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/results/result.hpp"

namespace dtsim::reports {

// "data 2 x context 2 x tensor 4 x pipeline 4": every dimension the GPUs are split along.
std::string parallel_dimensions(const strategies::ParallelismSpec& p);
// The human-readable summary `run` and `memory` print.
std::string summary(const results::Result& r);

// Chrome trace (chrome://tracing, Perfetto): one process per rank, with tracks (threads) for
// compute, communication and the data loader. Slices that overlap in time on one of them (kernels
// or collectives in flight at once) go to extra tracks ("compute 2", ...), so no track holds two
// partially overlapping slices. Each slice's args give its FLOPs and bytes, and for collectives
// the operation, algorithm, group and link. Only the first `max_ranks` ranks are written; big
// runs would be unreadable.
nlohmann::json chrome_trace(const results::Result& r, int max_ranks = 64);

// A self-contained HTML page: breakdown bar, timeline of the simulated GPUs, memory bars.
std::string html_report(const results::Result& r);

struct Comparison {
  std::vector<std::string> lines;  // one per metric compared
  bool regression = false;
};
// Candidate vs baseline result.json: slower step, lower throughput, more memory beyond
// rel_tol, or a plan that stopped fitting, is a regression.
Comparison compare(const nlohmann::json& baseline, const nlohmann::json& candidate, double rel_tol);
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
                         const std::string& candidate_name, double rel_tol, const std::string& baseline_timeline = "",
                         const std::string& candidate_timeline = "");

}  // namespace dtsim::reports
