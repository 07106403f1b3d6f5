#pragma once
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "sim/network/platform.hpp"
#include "sim/taskgraph/task_graph.hpp"

namespace dtsim::network {

struct Flow {
  int src = 0, dst = 0;  // endpoints
  double bytes = 0;
};

// Flows that run at once, then a fixed latency before the next phase. A uniform algorithm (ring,
// pipelined tree) moves the same bytes over the same hops at every step, so its steps are
// aggregated into one phase of long flows, O(p) instead of O(p^2) messages, and the step latencies
// the aggregation hides come back as `latency`. Algorithms whose steps use different links
// (halving-doubling, hierarchical, master-worker) keep one phase per step.
// Work a server's CPU does within a phase (summing or applying gradients); work on one endpoint
// shares that host's CPU with whatever else runs there.
struct HostWork {
  int endpoint = 0;
  double seconds = 0;
};

// Flows [first, first + count) of a phase that move in lockstep: the hops of one ring channel each
// carry the same bytes and can go no faster than the slowest of them. A simulator may run them as
// one flow across all their links, which costs one event instead of one per hop.
struct Chain {
  std::size_t first = 0, count = 0;
};

struct Phase {
  std::vector<Flow> flows;
  std::vector<Chain> chains;
  std::vector<HostWork> work;
  double latency = 0;
  // Appends another group's flows, chains and work, running at the same time.
  void add(const Phase& other);
};

struct LoweredCollective {
  std::vector<Phase> phases;
  std::size_t flow_count() const;
  std::vector<Flow> all_flows() const;
};

// One group: `ranks` are GPU ids, the first is the root of rooted operations (broadcast,
// reduce, master-worker). For SendRecv, ranks = {source, destination}.
LoweredCollective lower(const Platform& platform, taskgraph::CollectiveOp op, taskgraph::Algorithm a, double bytes,
                        const std::vector<int>& ranks);
// Every group of `c` at once; phase k of every group runs together.
LoweredCollective lower(const Platform& platform, const taskgraph::Collective& c,
                        const std::vector<std::vector<int>>& groups);

// Several groups' lowerings running at once, as lower(platform, c, groups) joins them: phase k
// of every group together, flows of different groups on one route as one flow (in route order),
// chained flows kept apart, group by group.
class GroupMerge {
 public:
  void add(const LoweredCollective& one);
  LoweredCollective done();

 private:
  std::vector<std::map<std::pair<int, int>, double>> merged_;
  std::vector<Phase> chained_;
};

// An offload copy: `bytes` between each GPU of `gpus` and its node's host memory at once, over
// the GPU's PCIe link, its switch's uplink and the host's memory (one phase).
LoweredCollective lower_host_copy(const Platform& platform, double bytes, const std::vector<int>& gpus, bool to_host);

// Contention-free estimate from the same flows: each phase lasts as long as its slowest flow at
// its route's most loaded link's fair share, plus the phase latency.
double analytical_time(const Platform& platform, const LoweredCollective& lc);
// analytical_time, and in `no_bytes` the same collective's time with no bytes (latencies and
// host work alone), in one walk.
double analytical_times(const Platform& platform, const LoweredCollective& lc, double& no_bytes);

// A lowering's time against a factor on every flow's bytes, for pricing one collective at many
// sizes: each phase's flows reduced to those that can be its slowest (seconds per unit factor,
// fixed seconds), so that at(f) is analytical_time of the lowering scaled by f, up to rounding.
struct TimeLines {
  struct Phase {
    std::vector<std::pair<double, double>> lines;  // no line above another at every factor
    double latency = 0;
  };
  std::vector<Phase> phases;
  double at(double factor) const;
};
// Nothing where a phase has host work (whose seconds need not scale with the bytes).
std::optional<TimeLines> time_lines(const Platform& platform, const LoweredCollective& lc);

// A collective on one group at any size from one lowering per algorithm it may run as (the
// candidates, each lowered at one byte), where each of those algorithms only scales with the
// size (AlgorithmUnit::linear): `sized_time` is analytical_time(lower(...)) plus `launch`, up to
// rounding. No candidates where that does not hold; no time for a size that lowers otherwise
// (through NVLink SHARP switches).
std::vector<taskgraph::Algorithm> sized_candidates(const Platform& platform, taskgraph::CollectiveOp op,
                                                   taskgraph::Algorithm a, const std::vector<int>& ranks);
LoweredCollective lower_one_byte(const Platform& platform, taskgraph::CollectiveOp op, taskgraph::Algorithm candidate,
                                 const std::vector<int>& ranks);
// `lines`: each candidate's, in sized_candidates' order.
std::optional<double> sized_time(const Platform& platform, taskgraph::CollectiveOp op, taskgraph::Algorithm a, double bytes,
                                 const std::vector<int>& ranks, const std::vector<TimeLines>& lines, double launch);

// NCCL's view of a group of `ranks` GPUs over `nodes` nodes, at most `widest` on one node.
nccl::Setup nccl_setup(const ClusterSpec& c, int ranks, int nodes, int widest);
// What NCCL's tuning model predicts for this collective on `ranks` (its algorithm, protocol and
// time), when the cluster names NCCL's GPU generation, gives no inter-node efficiency points and
// the group spans nodes, or sits in one node whose switches reduce (`intra_nvls`); lowering makes
// the collective take at least that long, and runs it through the switches where NCCL picks NVLS.
std::optional<nccl::Prediction> nccl_prediction(const Platform& platform, taskgraph::CollectiveOp op, double bytes,
                                                const std::vector<int>& ranks);

// The algorithm `Auto` resolves to for this collective; `Auto` itself where NCCL runs it as NVLS
// or an NVLS tree (nccl_prediction names which).
taskgraph::Algorithm choose(const Platform& platform, taskgraph::CollectiveOp op, taskgraph::Algorithm a, double bytes,
                            const std::vector<int>& ranks);

// Contention-free time of one inline collective on its group.
double inline_time(const Platform& platform, const taskgraph::InlineCollective& c, const std::vector<int>& ranks);

// Closed form of a ring all-reduce on p ranks at per-step latency alpha and bandwidth B:
// 2(p-1)(alpha + S/(p B)) (Thakur et al. 2005; Patarasuk & Yuan 2009).
double ring_all_reduce_closed_form(int p, double bytes, double alpha, double bandwidth);

// What lowering a collective would build, counted without building it, so that work too large
// for the machine can be refused first: flows in all (every phase), flows of its widest phase (all
// in flight at once), and whether they run as chains (ring-like hops a simulator moves together) or
// as independent flows, which SimGrid's solver pays for far more dearly. `groups` groups of
// `group_size` GPUs each, `per_node` of each group's GPUs on one node. An upper bound, following
// sim/network/algorithms.cpp; `Auto` counts the largest of the candidates it chooses from (the tree).
struct FlowBound {
  double flows = 0, widest = 0;
  bool chained = true;
};
// `bytes` (when known, else 0) tells where NCCL runs NVLS instead of a ring on NVLink SHARP nodes.
FlowBound flow_bound(const ClusterSpec& c, taskgraph::CollectiveOp op, taskgraph::Algorithm a, double group_size,
                     double groups, double per_node, double bytes = 0);

// nccl-tests' bus-bandwidth factor (doc/PERFORMANCE.md): busbw = algbw x factor.
double bus_bandwidth_factor(taskgraph::CollectiveOp op, int p);

}  // namespace dtsim::network
