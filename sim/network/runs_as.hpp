#pragma once
#include <string>
#include <vector>

#include "sim/network/platform.hpp"
#include "sim/taskgraph/task_graph.hpp"

namespace dtsim::network {

// What one group's collective runs as, in words: the algorithm (what `auto` picked; "nvls" or
// "nvls_tree" where NCCL takes the NVLink switches) and, where NCCL's model sets a floor under its
// time, NCCL's own pick: "ring (NCCL model: tree/LL128)".
std::string runs_as(const Platform& platform, taskgraph::CollectiveOp op, taskgraph::Algorithm a, double bytes,
                    const std::vector<int>& ranks);

}  // namespace dtsim::network
