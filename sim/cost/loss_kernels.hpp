#pragma once
// The kernels a framework runs for the loss over the logits: the stack's loss mechanism.
#include <vector>

#include "models/model_graph.hpp"
#include "sim/cost/stack.hpp"

namespace dtsim::cost {

// The memory-bound passes, one kernel each, that replace the model's own loss kernel `k` (a
// LossForward or LossBackward role); empty: the model's kernel as it is.
std::vector<MemoryPass> loss_passes(Loss loss, const models::Kernel& k);

// torch.compile's cross-entropy forward rate over rows of `row` logits, as a share of the device's
// streaming rate.
double compiled_forward_share(double row);

}  // namespace dtsim::cost
