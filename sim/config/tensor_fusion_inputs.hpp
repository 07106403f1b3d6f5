#pragma once
#include "sim/config/scenario.hpp"

namespace dtsim::config {

// Tensor fusion's inputs from the cost model (strategies/tensor_fusion.hpp), set once the scenario
// is read: when each layer's gradients are ready in the final backward, from the same per-layer
// backward works the planner emits priced as the replay prices them, and what copying a byte
// into or out of the fusion buffer takes. Nothing when the stack has no tensor fusion.
void price_tensor_fusion(Scenario& s);

}  // namespace dtsim::config
