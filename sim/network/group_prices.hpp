#pragma once
// Collective prices by group shape, for searches that price the same collectives over and over
// (the sweep's closed form): what analytical_time(platform, lower(platform, c, groups)) gives (to
// rounding), at the cost of the distinct work.
// - Groups that sit elsewhere on the cluster but alike (moved by whole nodes, or by places inside
//   NVSwitch nodes whose NICs move with them: Platform::can_shift) cost the same: each shape is
//   priced once.
// - A collective whose algorithm only scales with the size (AlgorithmUnit::linear) is lowered
//   once per shape, at one byte, and priced at every size from that lowering's lines, up to
//   rounding.
// - Groups of one collective that are one group moved (a data-parallel collective's tensor ranks,
//   the tied embeddings' pairs) and cross no link the same way as one another cost what one of
//   them costs alone: only that one is lowered.
#include <cstddef>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/network/algorithms.hpp"
#include "sim/network/collectives.hpp"

namespace dtsim::network {

// Whether groups that are one group moved cross no link the same way, found before for these
// flows of the first group (their endpoints, phase by phase; not their bytes).
struct ApartMemo {
  std::vector<std::pair<std::vector<int>, bool>> seen;
};

// Caches by shape, so one per platform and thread.
class GroupPrices {
 public:
  explicit GroupPrices(const Platform& platform) : pf_(platform) {}
  double time(const taskgraph::Collective& c, const std::vector<std::vector<int>>& groups);
  // The same for a caller that prices the same groups at many sizes: `shape` is shape(groups),
  // found once (finding it reads every rank).
  double time(const taskgraph::Collective& c, const std::vector<std::vector<int>>& groups, std::size_t shape);
  std::size_t shape(const std::vector<std::vector<int>>& groups);
  std::size_t shapes() const { return shapes_.size(); }         // distinct group shapes
  std::size_t priced() const { return prices_.size(); }         // distinct collectives on them
  std::size_t priced_alone() const { return alone_; }  // of those, priced from one of their groups
  std::size_t lowered() const { return lowered_; }       // of those, lowered for their own size

 private:
  struct Shape {
    std::vector<std::vector<int>> groups;  // moved to the shape's origin
    int congruent = -1;                    // whether each group is the first moved (-1: not looked at yet)
    std::vector<std::pair<int, int>> moves;  // each group's (nodes, places) from the first
    ApartMemo apart;  // whether the moved groups cross a link alike, by the first's flows
    // By (op, algorithm): each candidate's lines (sized_time), from one lowering of the first
    // group, where every size can be priced so (none where not).
    std::map<std::pair<int, int>, std::vector<TimeLines>> sized;
  };
  const std::vector<TimeLines>& sized(Shape& sh, const taskgraph::Collective& c);
  using RanksHash = algorithms::RanksHash;
  struct Key {
    int op, algorithm;
    double bytes, launch;
    std::size_t shape;
    bool operator==(const Key& o) const = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const;
  };
  const Platform& pf_;
  std::unordered_map<std::vector<int>, std::size_t, RanksHash> ids_;  // each group's size, then its ranks
  std::vector<Shape> shapes_;
  std::unordered_map<Key, double, KeyHash> prices_;
  std::size_t alone_ = 0, lowered_ = 0;
  algorithms::HopChecks hops_;  // the shapes' channels, the same at every size
};

// The same time without a cache: one group lowered where the others are that group moved and
// cross no link the same way as it (else every group lowered and joined); `alone` says which.
double groups_time(const Platform& platform, const taskgraph::Collective& c, const std::vector<std::vector<int>>& groups,
                   bool* alone = nullptr);

}  // namespace dtsim::network
