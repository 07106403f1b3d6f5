#pragma once
// What `sweep` and `merge` share to print a sweep's outcome (sweep.cpp) and the planner's table
// of the best per cluster (sweep_plan.cpp).
#include <nlohmann/json.hpp>
#include <string>

#include "sim/cli/commands.hpp"
#include "sim/sweep/human.hpp"
#include "sim/sweep/limits.hpp"
#include "sim/sweep/search.hpp"

namespace dtsim::cli {

// RFC 4180: a field with a comma, quote or line break is quoted, its quotes doubled.
std::string csv_field(const std::string& v);
const char* priced_by(const sweep::Candidate& c);
std::string ranked_by(const std::string& rank_by, bool has_length);
// A ranked row as the JSON output gives it.
nlohmann::ordered_json json_row(const sweep::Outcome& r, const sweep::Candidate& c);
sweep::Limits limits_of(const SweepOptions& o);
nlohmann::ordered_json limits_json(const sweep::Limits& l);
// "the limits (at most 30.0 days, at most $2.00 M, at least 4 GiB free per GPU)"
std::string limits_text(const sweep::Limits& l);
// The counts, why candidates were replayed or failed, what "best" means, and the limits.
void print_text_header(const sweep::Outcome& r, const SweepOptions& o, const std::string& none_fits);
// `--by-cluster`: the best per cluster as a text table, CSV or JSON (the same rows in each).
void print_plan(const sweep::Outcome& r, const SweepOptions& o, const std::string& none_fits);
// Prints the outcome as `o` asks and writes --write-best; returns the exit code.
int report(const sweep::Outcome& r, const SweepOptions& o);

}  // namespace dtsim::cli
