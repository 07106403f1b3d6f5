#pragma once
// A scenario given as text rather than a file: a request to `dtsim serve`, answered in process.
#include <string>

#include "sim/config/scenario.hpp"

namespace dtsim::config {

// Reads and validates `text` as load_scenario would the file `name` alone in an empty folder:
// errors name `name` ("scenario.json:/parallelism/data: ..."), byte for byte as
// `dtsim run name` prints them there; "extends" and named files must be the project's own.
Scenario load_scenario_text(const std::string& text, const std::string& name);

}  // namespace dtsim::config
