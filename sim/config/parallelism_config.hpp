#pragma once
#include "sim/config/scenario.hpp"
#include "sim/core/json_reader.hpp"

namespace dtsim::config {

// The scenario's `parallelism` object into s.parallelism, with what each split needs of the
// model and cluster (read first) and what it is not modelled with.
void parse_parallelism(Reader r, Scenario& s);
// fp16 gradient compression where the gradients are already 2 bytes or fewer: refused, once the
// training precision is known.
void refuse_idle_compression(const Scenario& s, const Origins& origins);

}  // namespace dtsim::config
