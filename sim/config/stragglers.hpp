#pragma once
#include <memory>

#include "sim/config/scenario.hpp"
#include "sim/core/json_reader.hpp"

namespace dtsim::config {

// The scenario's `stragglers` block: jitter, slow and throttled GPUs, flapping links, backup
// workers and stage rebalancing. Parsed after the cluster and parallelism it refers to.
void parse_stragglers(Reader& st, Scenario& s, const std::shared_ptr<Origins>& origins);

}  // namespace dtsim::config
