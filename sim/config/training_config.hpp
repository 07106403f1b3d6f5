#pragma once
#include "sim/config/scenario.hpp"
#include "sim/core/json_reader.hpp"

namespace dtsim::config {

// The scenario's `training` object: global batch (or DeepSpeed's names for it), precision,
// optimizer, attention, and the run's length under the names Megatron, Hugging Face and DeepSpeed
// users write. Reads `s.parallelism` and `s.model`, so it runs after them.
void parse_training(Reader r, Scenario& s);

}  // namespace dtsim::config
