#pragma once
#include "sim/config/scenario.hpp"
#include "sim/core/json_reader.hpp"

namespace dtsim::config {

// The scenario's `stack` object (docs/stacks.md): `preset` names a registered stack
// (sim/cost/stack.cpp), `attention` and `elementwise` override its mechanisms one by one.
// Absent, the default stack: dtsim's pricing as it was before stacks. Runs after `training`.
void parse_stack(Reader& root, Scenario& s);

}  // namespace dtsim::config
