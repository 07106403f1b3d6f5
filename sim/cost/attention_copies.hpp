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

// What torch.compile's Inductor runs beside the fused attention kernel `k` where the stack's
// copies are its own (copies "fused" under a compiled stack): one RoPE kernel for each of q and k
// forward, and backward one kernel that rotates dq and dk back and writes them with dv into the QKV
// projection's gradient (the split's backward cat).
std::vector<MemoryPass> compiled_copy_passes(const models::Kernel& k);

}  // namespace dtsim::cost
