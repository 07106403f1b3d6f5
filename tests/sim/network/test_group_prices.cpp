// Collective prices by group shape (sim/network/group_prices.hpp) are the plain lowering's (to
// rounding: sizes are priced from one lowering's lines) on every kind of platform; groups that
// are one group moved are priced once, and a shape's sizes from one lowering.
#include <gtest/gtest.h>

#include <optional>
#include <stdexcept>
#include <string>

#include "sim/network/group_prices.hpp"

#include "helpers.hpp"

using namespace dtsim;
using taskgraph::Algorithm;
using taskgraph::CollectiveOp;
using Groups = std::vector<std::vector<int>>;

namespace {

// 8-GPU nodes with `nics` NICs each, NCCL's tuning model and measured efficiencies.
network::ClusterSpec node8(int nodes, int nics) {
  network::ClusterSpec c = test::flat_cluster(nodes);
  c.gpus_per_node = 8;
  c.nics_per_node = nics;
  c.topology = network::Topology::FatTree;
  c.intra_efficiency = 0.77;
  c.intra_efficiency_points = {{1 << 20, 0.7}, {1 << 24, 0.43}, {1 << 30, 0.77}};
  c.nccl_gpu = network::nccl::Gpu::Ampere;
  c.gpus_per_pcie_switch = 2;
  return c;
}

// Every platform kind the shape rules treat apart.
std::vector<std::pair<std::string, network::ClusterSpec>> platforms() {
  std::vector<std::pair<std::string, network::ClusterSpec>> out;
  out.emplace_back("fat-tree", node8(8, 8));
  auto few = node8(8, 4);
  few.inter_efficiency_points = {{1e3, 0.2}, {1e9, 0.9}};
  out.emplace_back("four NICs, inter points", few);
  auto over = node8(8, 2);
  over.oversubscription = 2;
  out.emplace_back("oversubscribed", over);
  auto rails = node8(8, 8);
  rails.topology = network::Topology::RailOptimized;
  rails.oversubscription = 4;
  out.emplace_back("rail-optimized", rails);
  auto nvls = node8(8, 8);
  nvls.intra_nvls = true;
  nvls.nccl_gpu = network::nccl::Gpu::Hopper;
  out.emplace_back("nvls", nvls);
  auto ring = node8(4, 1);
  ring.fabric = network::Fabric::NvLinkRing;
  out.emplace_back("nvlink ring", ring);
  auto pcie = node8(4, 1);
  pcie.fabric = network::Fabric::Pcie;
  pcie.host_bridge_bandwidth = 20e9;
  out.emplace_back("pcie", pcie);
  auto torus = test::flat_cluster(16);
  torus.torus_dims = {4, 4};
  torus.torus_link_bandwidth = 50e9;
  torus.torus_link_latency = 1e-6;
  out.emplace_back("torus", torus);
  return out;
}

// Megatron's groups for tensor T, pipeline P and data D on `gpus` GPUs (tensor ranks innermost):
// each stage's data-parallel groups, one per tensor rank, and the tied embeddings' pairs.
std::vector<Groups> megatron_groups(int gpus) {
  std::vector<Groups> out;
  for (int T : {1, 2, 4, 8})
    for (int P : {1, 2, 4})
      if (gpus % (T * P) == 0 && gpus / (T * P) >= 2) {
        const int D = gpus / (T * P);
        auto gpu = [&](int d, int s, int t) { return t + T * (s + P * d); };
        for (int s = 0; s < P; ++s) {
          Groups data;
          for (int t = 0; t < T; ++t) {
            auto& g = data.emplace_back();
            for (int d = 0; d < D; ++d) g.push_back(gpu(d, s, t));
          }
          out.push_back(data);
        }
        Groups pairs;
        for (int d = 0; d < D && P > 1; ++d)
          for (int t = 0; t < T; ++t) pairs.push_back({gpu(d, 0, t), gpu(d, P - 1, t)});
        if (!pairs.empty()) out.push_back(pairs);
      }
  out.push_back({{0, 9}});
  out.push_back({{3, 12}, {4, 13}});
  return out;
}

// analytical_time(lower(...)), or nothing where the algorithm does not implement the op.
std::optional<double> plain(const network::Platform& pf, const taskgraph::Collective& c, const Groups& groups) {
  try {
    return network::analytical_time(pf, network::lower(pf, c, groups));
  } catch (const std::invalid_argument&) {
    return std::nullopt;
  }
}

// Prices from lines differ from the plain lowering's by rounding alone.
void expect_same_price(double got, double want, const std::string& where) {
  EXPECT_NEAR(got, want, 1e-12 * want) << where;
}

}  // namespace

TEST(GroupPrices, EqualThePlainLoweringOnEveryPlatform) {
  const std::vector<std::pair<CollectiveOp, Algorithm>> kinds = {
      {CollectiveOp::AllReduce, Algorithm::Auto},          {CollectiveOp::AllReduce, Algorithm::Ring},
      {CollectiveOp::AllReduce, Algorithm::Tree},          {CollectiveOp::AllReduce, Algorithm::Hierarchical},
      {CollectiveOp::AllReduce, Algorithm::HalvingDoubling}, {CollectiveOp::ReduceScatter, Algorithm::Ring},
      {CollectiveOp::AllGather, Algorithm::Auto},          {CollectiveOp::AllToAll, Algorithm::Direct},
      {CollectiveOp::Broadcast, Algorithm::Tree},          {CollectiveOp::SendRecv, Algorithm::Ring}};
  int compared = 0;
  std::size_t alone = 0;  // prices found from one group of several
  for (const auto& [name, spec] : platforms()) {
    network::Platform pf(spec);
    network::GroupPrices prices(pf);
    for (const auto& groups : megatron_groups(spec.num_gpus()))
      for (const auto& [op, a] : kinds)
        for (double bytes : {3e3, 5e6, 2e9}) {
          if (op == CollectiveOp::SendRecv && groups.front().size() != 2) continue;
          taskgraph::Collective c{op, a, {}, bytes};
          c.launch_s = bytes > 1e9 ? 4e-6 : 0;
          const auto want = plain(pf, c, groups);
          if (!want) continue;
          // Asked twice: the second answer comes from the cache.
          const std::string where = name + " " + std::to_string(groups.size()) + " groups of " + std::to_string(groups.front().size());
          expect_same_price(prices.time(c, groups), *want, where);
          expect_same_price(prices.time(c, groups), *want, where);
          EXPECT_EQ(network::groups_time(pf, c, groups), *want) << where;
          ++compared;
        }
    alone += prices.priced_alone();
  }
  EXPECT_GT(compared, 2000);
  EXPECT_GT(alone, 200u);
}

TEST(GroupPrices, EverySizeOfAShapeIsPricedFromOneLowering) {
  network::Platform pf(node8(16, 8));
  network::GroupPrices prices(pf);
  // Tensor 8, data 16: each tensor rank's data-parallel group spans the 16 nodes on its own NIC.
  Groups data(8);
  for (int t = 0; t < 8; ++t)
    for (int d = 0; d < 16; ++d) data[static_cast<std::size_t>(t)].push_back(t + 8 * d);
  int compared = 0;
  for (CollectiveOp op : {CollectiveOp::AllReduce, CollectiveOp::ReduceScatter, CollectiveOp::AllGather})
    for (double bytes = 1e3; bytes < 4e9; bytes *= 1.7) {  // NCCL's floor and the efficiencies change with it
      const taskgraph::Collective c{op, Algorithm::Auto, {}, bytes};
      expect_same_price(prices.time(c, data), *plain(pf, c, data), std::to_string(bytes));
      ++compared;
    }
  EXPECT_EQ(compared, 3 * 29);
  EXPECT_EQ(prices.priced(), 3u * 29u);
  EXPECT_EQ(prices.lowered(), 0u);  // ring, tree and hierarchical lowered once each, at one byte
}

TEST(GroupPrices, EachStagesGroupsArePricedOnceWhereTheyAreOneShapeMoved) {
  network::Platform pf(node8(16, 8));
  network::GroupPrices prices(pf);
  // Tensor 2, pipeline 4, data 16: stage s's groups are stage 0's moved by 2s places in the node.
  const int T = 2, P = 4, D = 16;
  for (int s = 0; s < P; ++s) {
    Groups data;
    for (int t = 0; t < T; ++t) {
      auto& g = data.emplace_back();
      for (int d = 0; d < D; ++d) g.push_back(t + T * (s + P * d));
    }
    prices.time({CollectiveOp::AllReduce, Algorithm::Auto, {}, 1e8}, data);
  }
  EXPECT_EQ(prices.shapes(), 1u);
  // Each tensor rank's group has NICs of its own: one group is lowered, not two.
  EXPECT_EQ(prices.priced_alone(), 1u);
  // Four NICs per node: a move by one place changes which NIC a GPU shares, so it is another shape.
  network::Platform four(node8(16, 4));
  network::GroupPrices by_nic(four);
  by_nic.time({CollectiveOp::AllReduce, Algorithm::Ring, {}, 1e8}, {{0, 8, 16, 24}});
  by_nic.time({CollectiveOp::AllReduce, Algorithm::Ring, {}, 1e8}, {{1, 9, 17, 25}});
  by_nic.time({CollectiveOp::AllReduce, Algorithm::Ring, {}, 1e8}, {{2, 10, 18, 26}});
  EXPECT_EQ(by_nic.shapes(), 2u);
}
