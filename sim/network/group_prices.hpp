#pragma once
// Collective prices by group shape, for searches that price the same collectives over and over
// (the sweep's closed form): what analytical_time(platform, lower(platform, c, groups)) gives, bit
// for bit, at the cost of the distinct work.
// - Groups that sit elsewhere on the cluster but alike (moved by whole nodes, or by places inside
//   NVSwitch nodes whose NICs move with them: Platform::can_shift) cost the same: each shape is
//   priced once.
// - Groups of one collective that are one group moved (a data-parallel collective's tensor ranks,
//   the tied embeddings' pairs) and cross no link the same way as one another cost what one of
//   them costs alone: only that one is lowered.
#include <cstddef>
#include <unordered_map>
#include <vector>

#include "sim/network/collectives.hpp"

namespace dtsim::network {

// Caches by shape, so one per platform and thread.
class GroupPrices {
 public:
  explicit GroupPrices(const Platform& platform) : pf_(platform) {}
  double time(const taskgraph::Collective& c, const std::vector<std::vector<int>>& groups);
  std::size_t shapes() const { return prices_.size(); }
  std::size_t priced_alone() const { return alone_; }  // shapes priced from one of their groups

 private:
  struct Key {
    std::vector<double> fields;  // op, algorithm, bytes, launch
    std::vector<int> ranks;      // each group's size, then its ranks, moved to the shape's origin
    bool operator==(const Key& o) const { return fields == o.fields && ranks == o.ranks; }
  };
  struct Hash {
    std::size_t operator()(const Key& k) const;
  };
  const Platform& pf_;
  std::unordered_map<Key, double, Hash> prices_;
  std::size_t alone_ = 0;
};

// The same time without a cache: one group lowered where the others are that group moved and
// cross no link the same way as it (else every group lowered and joined); `alone` says which.
double groups_time(const Platform& platform, const taskgraph::Collective& c, const std::vector<std::vector<int>>& groups,
                   bool* alone = nullptr);

}  // namespace dtsim::network
