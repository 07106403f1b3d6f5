#pragma once
// The copies and casts a framework runs around a fused attention call (the QKV split, RoPE in
// fp32): the stack's copies mechanism.
#include <vector>

#include "models/model_graph.hpp"
#include "sim/cost/stack.hpp"

namespace dtsim::cost {

// The memory-bound passes, one kernel each, that run beside the fused attention kernel `k` (a
// FlashForward or FlashBackward role, with its models::AttentionIo); empty: none.
std::vector<MemoryPass> copy_passes(Copies copies, const models::Kernel& k);

}  // namespace dtsim::cost
