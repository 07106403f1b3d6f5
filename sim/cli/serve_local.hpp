#pragma once
#include <optional>
#include <string>

#include "sim/cli/serve_api.hpp"
#include "sim/cli/serve_pool.hpp"

namespace dtsim::cli {

// What `dtsim run scenario.json -o out --format json` answers for `scenario` (with `report`, the
// report.html of `--html`), computed in this process: 200 with what it prints, 400 with its error
// text for bad input (exit 2), 500 for a failure (exit 1). Nothing is written. nullopt when the
// scenario replays on SimGrid, which runs once per process: a child runs that one (run_child).
std::optional<api::Answer> run_here(const std::string& scenario, bool report);

// One simulation of `dtsim serve`: on `pool` (503 when its queue is full; 504 past the time limit,
// the simulation finishing unseen), and in a child when it replays on SimGrid.
api::Answer run_simulation(const ServeOptions& o, Pool& pool, const std::string& scenario, bool report);

}  // namespace dtsim::cli
