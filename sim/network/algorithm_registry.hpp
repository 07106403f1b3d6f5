#pragma once
#include <optional>
#include <string>
#include <vector>

#include "sim/network/algorithms.hpp"

// Every collective algorithm a scenario can name, one unit each: its name, how it lowers each
// operation to flows, how many flows that makes, and what the rest of the simulator asks of it.
// Each unit is defined beside its lowering (sim/network/algorithms/<name>.cpp) and listed once in
// algorithm_registry.cpp; taskgraph::Algorithm is its place in that list.
namespace dtsim::network {

// One group of `p` ranks; `channels`: the ring channels it runs (one per NIC once it leaves its node).
struct FlowShape {
  double p = 0, channels = 1;
  const ClusterSpec* cluster = nullptr;
};

struct AlgorithmUnit {
  const char* name = "";  // as scenarios spell it
  const char* doc = "";   // one line
  // One group's lowering of `op` (never a send-receive, which every algorithm runs as a chain);
  // nothing where the algorithm does not implement `op`. `bytes` > 0 and at least two ranks.
  std::optional<LoweredCollective> (*lower)(const Platform& pf, taskgraph::CollectiveOp op, double bytes,
                                            const std::vector<int>& ranks) = nullptr;
  // How many flows `lower` makes for one group, at most (flow_bound); nothing where it does not
  // implement `op`.
  std::optional<algorithms::FlowCount> (*flows)(taskgraph::CollectiveOp op, const FlowShape& s) = nullptr;
  // Where it runs when not between GPUs ("parameter servers", "host memory"); such an algorithm
  // takes neither NCCL's floor nor NCCL's measured efficiencies. nullptr: between GPUs.
  const char* server_link = nullptr;
  // Reduce-scatter and all-gather, as ZeRO's sharded gradients and parameters need.
  bool scatter_gather = false;
  // One member's asynchronous push and pull (`only`, Collective::only), where it has one, and the
  // flows it makes against a group of `group` ranks.
  LoweredCollective (*lower_async)(const Platform& pf, double bytes, const std::vector<int>& ranks, int only,
                                   double apply_factor) = nullptr;
  algorithms::FlowCount (*async_flows)(const ClusterSpec& c, double group) = nullptr;
  // Its lowering at any size is its lowering at one byte with every flow's bytes scaled: nothing
  // else in it depends on the size, so a search prices every size from one lowering (SizedPrices).
  bool linear = false;

  bool on_servers() const { return server_link != nullptr; }
};

// Every unit, in the order of taskgraph::Algorithm's values.
const std::vector<AlgorithmUnit>& algorithm_units();
const AlgorithmUnit& unit_of(taskgraph::Algorithm a);
const char* algorithm_name(taskgraph::Algorithm a);
std::optional<taskgraph::Algorithm> algorithm_named(const std::string& name);
std::vector<std::string> algorithm_names();

}  // namespace dtsim::network
