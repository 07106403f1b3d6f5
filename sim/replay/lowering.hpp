#pragma once
// What the SimGrid replay works out before it builds its platform: each task's collective or
// PCIe copy lowered to flows, and the chains among those flows. No SimGrid here: only
// simgrid_replay.cpp includes it.
#include <cstddef>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/network/collectives.hpp"
#include "sim/replay/replay.hpp"

namespace dtsim::replay {

// A distinct collective, lowered once before the run.
struct Prepared {
  network::LoweredCollective lowered;
  std::vector<std::vector<int>> chain_pair;  // per phase, per chain: its host pair
  std::vector<std::vector<char>> chained;    // per phase, per flow: part of a chain
  std::uint32_t id = 0;                      // in PreparedOf::distinct
};

// Each task's prepared collective or copy, as an index into the distinct ones (0: none). A
// pointer per task cost 8 bytes, 18 MB at 2.3 million tasks.
struct PreparedOf {
  std::vector<const Prepared*> distinct{nullptr};
  std::vector<std::uint32_t> of;
  const Prepared* operator[](std::size_t task) const { return distinct[of[task]]; }
  std::uint32_t add(Prepared& p) {
    p.id = static_cast<std::uint32_t>(distinct.size());
    distinct.push_back(&p);
    return p.id;
  }
};

// The distinct chains (hops moving in lockstep, each a source and destination endpoint), numbered
// in the order first met: the SimGrid replay gives chain k host pair k.
struct ChainRoutes {
  using Hops = std::vector<std::pair<int, int>>;
  std::map<Hops, int> id_of;
  std::vector<const Hops*> hops;  // by id
  int add(const Hops& hop_list);
};

// Lowers every collective of the graph, once per distinct one, and numbers its chains. A PCIe
// copy's flows (all the GPUs its task stands for, to or from their hosts' memory), once per
// distinct copy work. The result points into `store` and `copies`.
PreparedOf prepare(const ReplayInput& in, ChainRoutes& chains,
                   std::unordered_map<const taskgraph::Collective*, Prepared>& store, std::map<int, Prepared>& copies);

}  // namespace dtsim::replay
