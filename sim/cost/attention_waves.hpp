#pragma once
// How well a FlashAttention-2 kernel's thread blocks fill the GPU's SMs, against the grid the
// published rates were measured with: few heads, a short batch and the causal mask's uneven blocks
// leave SMs idle at the end of the kernel.
#include <vector>

#include "models/model_graph.hpp"
#include "sim/cost/stack.hpp"

namespace dtsim::cost {

// Share of the device busy over the kernel, by list scheduling: `jobs` blocks of work, dispatched
// in order, each to the first of `slots` to come free. Returns sum(jobs) / (slots x makespan).
double grid_fill(const std::vector<double>& jobs, int slots);

// The factor (<= 1) on the published FlashAttention-2 rate for kernel `k` (FlashForward or
// FlashBackward role: batch = b x heads, m = queries, n = keys, k = head dim) on `sm_count` SMs:
// its grid's fill over that of the benchmark grid behind the rate (batch x sequence = 16k, heads
// x head dim = 2,048). 1 for other implementations, or when the profile names no sm_count.
double flash_grid_factor(AttentionImpl impl, const models::Kernel& k, int sm_count);

}  // namespace dtsim::cost
