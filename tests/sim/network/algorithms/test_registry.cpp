// Every registered collective algorithm, whatever it is: its name, its flow count against its
// lowering, and what it refuses. A new algorithm is checked here as soon as it is registered.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>

#include "sim/network/algorithm_registry.hpp"
#include "sim/network/collectives.hpp"

#include "helpers.hpp"

using namespace dtsim;
using taskgraph::Algorithm;
using taskgraph::CollectiveOp;

namespace {

const CollectiveOp kOps[] = {CollectiveOp::AllReduce, CollectiveOp::ReduceScatter, CollectiveOp::AllGather,
                             CollectiveOp::Broadcast, CollectiveOp::Reduce,        CollectiveOp::AllToAll};

Algorithm algorithm(std::size_t i) { return static_cast<Algorithm>(i); }

std::vector<int> first(int p) {
  std::vector<int> v;
  for (int i = 0; i < p; ++i) v.push_back(i);
  return v;
}

// `nodes` nodes of `per_node` GPUs, a NIC per GPU.
network::ClusterSpec cluster(int nodes, int per_node, int ps_servers) {
  network::ClusterSpec c = test::flat_cluster(nodes);
  c.gpus_per_node = per_node;
  c.nics_per_node = per_node;
  c.ps_servers = ps_servers;
  return c;
}

}  // namespace

// Scenarios, reports and the CLI spell an algorithm by its registered name: each reads back as
// itself, no two share one, and the values other layers name are the ones so called.
TEST(AlgorithmRegistry, NamesRoundTrip) {
  const auto& units = network::algorithm_units();
  ASSERT_GE(units.size(), 11u);
  std::set<std::string> seen;
  for (std::size_t i = 0; i < units.size(); ++i) {
    const std::string name = network::algorithm_name(algorithm(i));
    EXPECT_TRUE(seen.insert(name).second) << name;
    EXPECT_EQ(network::algorithm_named(name), algorithm(i)) << name;
    EXPECT_FALSE(std::string(units[i].doc).empty()) << name;
  }
  const auto names = network::algorithm_names();  // what scenarios may name, in the registry's order
  ASSERT_EQ(names.size(), units.size());
  for (std::size_t i = 0; i < units.size(); ++i) EXPECT_EQ(names[i], units[i].name);
  EXPECT_EQ(network::algorithm_named("ring"), Algorithm::Ring);
  EXPECT_EQ(network::algorithm_named("halving-doubling"), Algorithm::HalvingDoubling);
  EXPECT_EQ(network::algorithm_named("parameter-server"), Algorithm::ParameterServer);
  EXPECT_EQ(network::algorithm_named("central-storage"), Algorithm::CentralStorage);
  EXPECT_EQ(network::algorithm_named("auto"), Algorithm::Auto);
  EXPECT_EQ(network::algorithm_named("Ring"), std::nullopt);
  EXPECT_EQ(network::algorithm_named("nccl"), std::nullopt);
  EXPECT_THROW(network::unit_of(algorithm(units.size())), std::logic_error);
}

// The budget refuses work too large before building it from each algorithm's count, so the count
// must cover what the lowering builds, in all and in its widest phase, for every operation it
// implements, and name the same operations.
TEST(AlgorithmRegistry, FlowCountCoversWhatLoweringBuilds) {
  for (const auto& [nodes, per_node, servers] : {std::tuple{12, 1, 0}, std::tuple{3, 8, 0}, std::tuple{12, 1, 3}}) {
    const auto c = cluster(nodes, per_node, servers);
    network::Platform pf(c);
    for (int p : {2, 3, 5, 8, 12, 24}) {
      if (p > nodes * per_node) continue;
      const double local = std::min(p, per_node);
      const double channels = p > local ? std::max(1.0, std::min<double>(c.nics_per_node, local)) : 1.0;
      const network::FlowShape shape{static_cast<double>(p), channels, &c};
      for (const auto& unit : network::algorithm_units()) {
        if (!unit.lower) continue;  // auto: another unit runs
        for (auto op : kOps) {
          SCOPED_TRACE(std::string(unit.name) + " " + taskgraph::to_string(op) + " p=" + std::to_string(p) +
                       " per node " + std::to_string(per_node) + " servers " + std::to_string(servers));
          const auto lc = unit.lower(pf, op, 1e8, first(p));
          const auto n = unit.flows(op, shape);
          ASSERT_EQ(lc.has_value(), n.has_value());
          if (!lc) continue;
          std::size_t widest = 0;
          for (const auto& ph : lc->phases) widest = std::max(widest, ph.flows.size());
          EXPECT_GT(lc->flow_count(), 0u);
          EXPECT_GE(n->flows, static_cast<double>(lc->flow_count()));
          EXPECT_GE(n->widest, static_cast<double>(widest));
        }
      }
    }
  }
}

// What ZeRO asks of an algorithm (reduce-scatter and all-gather) is what its lowering does.
TEST(AlgorithmRegistry, ScatterGatherTraitMatchesLowering) {
  network::Platform pf(cluster(2, 4, 0));
  for (const auto& unit : network::algorithm_units()) {
    if (!unit.lower) continue;
    const bool both = unit.lower(pf, CollectiveOp::ReduceScatter, 1e8, first(8)).has_value() &&
                      unit.lower(pf, CollectiveOp::AllGather, 1e8, first(8)).has_value();
    EXPECT_EQ(unit.scatter_gather, both) << unit.name;
  }
}

// An operation an algorithm does not implement is refused by name, whatever the algorithm.
TEST(AlgorithmRegistry, UnsupportedOperationIsNamed) {
  network::Platform pf(cluster(2, 4, 0));
  auto message = [&](CollectiveOp op, Algorithm a) {
    try {
      network::lower(pf, op, a, 1e6, first(8));
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("lowered");
  };
  EXPECT_EQ(message(CollectiveOp::ReduceScatter, Algorithm::Tree), "tree does not implement reduce_scatter");
  EXPECT_EQ(message(CollectiveOp::Broadcast, Algorithm::HalvingDoubling), "halving-doubling does not implement broadcast");
  EXPECT_EQ(message(CollectiveOp::AllToAll, Algorithm::ParameterServer), "parameter-server does not implement all_to_all");
  EXPECT_EQ(message(CollectiveOp::AllReduce, Algorithm::Tree), "lowered");
  // Every unit's every refusal reads the same way.
  for (std::size_t i = 0; i < network::algorithm_units().size(); ++i) {
    const auto& unit = network::algorithm_units()[i];
    if (!unit.lower) continue;
    for (auto op : kOps) {
      if (unit.lower(pf, op, 1e6, first(8))) continue;
      EXPECT_EQ(message(op, algorithm(i)), std::string(unit.name) + " does not implement " + taskgraph::to_string(op));
    }
  }
}
