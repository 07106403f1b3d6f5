#pragma once
#include <string>

#include "sim/cli/serve_api.hpp"

namespace dtsim::cli {

// `dtsim run scenario.json -o out --format json` in a fresh temporary folder, as a child in its own
// process group: 200 with its stdout, 400 (exit 2) or 500 with its stderr, 504 past the time limit.
// With `report`, the run also writes report.html (--html), and a 200 answers that file instead.
// The child is reaped and the folder removed on every way out.
// More than --jobs at once: 503.
api::Answer run_child(const ServeOptions& o, const std::string& scenario, bool report = false);

// The 504 answer past --time-limit.
api::Answer time_limit_passed(const ServeOptions& o);

// Refuses new children, kills the running ones' groups and returns once each is reaped and its
// folder removed: the server's way out on SIGINT or SIGTERM.
void stop_children();

}  // namespace dtsim::cli
