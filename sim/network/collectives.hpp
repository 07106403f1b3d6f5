#pragma once
#include <vector>

#include "sim/network/platform.hpp"
#include "sim/taskgraph/task_graph.hpp"

namespace dtsim::network {

struct Flow {
  int src = 0, dst = 0;  // endpoints
  double bytes = 0;
};

// A collective as a few long concurrent flows plus a fixed latency paid after they finish.
// A uniform ring moves the same bytes over the same hop at every step, so its 2(p-1) steps are
// aggregated into one flow per hop: O(p) flows instead of O(p^2) messages. The step latencies the
// aggregation hides are added back in `extra_latency`.
struct LoweredCollective {
  std::vector<Flow> flows;
  double extra_latency = 0;
};

// One group: `ranks` are GPU ids. For SendRecv, ranks = {source, destination}.
LoweredCollective lower(const Platform& platform, taskgraph::CollectiveOp op, taskgraph::Algorithm a, double bytes,
                        const std::vector<int>& ranks);
// Every group of `c` at once; flows with the same route are merged.
LoweredCollective lower(const Platform& platform, const taskgraph::Collective& c,
                        const std::vector<std::vector<int>>& groups);

// Contention-free estimate from the same flows: each flow runs at its route's most loaded link's
// fair share; the collective ends with its slowest flow plus the extra latency.
double analytical_time(const Platform& platform, const LoweredCollective& lc);

// Contention-free time of one inline collective on its group.
double inline_time(const Platform& platform, const taskgraph::InlineCollective& c, const std::vector<int>& ranks);

// Closed form of a ring all-reduce on p ranks at per-step latency alpha and bandwidth B:
// 2(p-1)(alpha + S/(p B)) (Thakur et al. 2005; Patarasuk & Yuan 2009).
double ring_all_reduce_closed_form(int p, double bytes, double alpha, double bandwidth);

}  // namespace dtsim::network
