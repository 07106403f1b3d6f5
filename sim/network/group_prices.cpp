#include "sim/network/group_prices.hpp"

#include "sim/network/algorithm_registry.hpp"
#include <algorithm>
#include <cstdint>
#include <cstring>

namespace dtsim::network {

using taskgraph::Algorithm;

namespace {

// Servers and asynchronous pushes are left to the plain path: their endpoints do not move with
// the groups.
bool by_shape(const Platform& pf, const taskgraph::Collective& c) {
  return !pf.torus() && c.only < 0 && !unit_of(c.algorithm).on_servers();
}

using Move = std::pair<int, int>;  // whole nodes, places inside the node

int moved(const Platform& pf, int gpu, const Move& m) { return gpu + m.first * pf.spec().gpus_per_node + m.second; }

// The move that brings the groups to the first node (and to the first places of their nodes
// where the platform allows).
Move to_origin(const Platform& pf, const std::vector<std::vector<int>>& groups) {
  int node = pf.spec().nodes, local = pf.spec().gpus_per_node;
  for (const auto& g : groups)
    for (int r : g) {
      node = std::min(node, pf.node_of(r));
      local = std::min(local, pf.local_of(r));
    }
  return {-node, pf.can_shift(-local) ? -local : 0};
}

// Each group as the first one moved, in `moves`; false where one is not.
bool moves_of(const Platform& pf, const std::vector<std::vector<int>>& groups, std::vector<Move>& moves) {
  const auto& first = groups.front();
  if (first.empty()) return false;
  for (const auto& g : groups) {
    if (g.size() != first.size()) return false;
    const Move m{pf.node_of(g[0]) - pf.node_of(first[0]), pf.local_of(g[0]) - pf.local_of(first[0])};
    if (!pf.can_shift(m.second)) return false;
    for (std::size_t i = 0; i < g.size(); ++i)
      if (pf.node_of(g[i]) != pf.node_of(first[i]) + m.first || pf.local_of(g[i]) != pf.local_of(first[i]) + m.second) return false;
    moves.push_back(m);
  }
  return true;
}

// A sufficient condition for apart(), read off the first group alone and its endpoints moved:
// every link its flows cross belongs to one endpoint only, and no endpoint of one moved group is
// another's. Then each link a moved group crosses is one of its own endpoints', which no other
// group has. Routing every group's flows (apart) reads every GPU's; this reads each endpoint once.
bool apart_by_endpoints(const Platform& pf, const LoweredCollective& one, const std::vector<Move>& moves) {
  // Endpoints marked while they are looked at, all clear between calls (only the ones set are cleared).
  thread_local std::vector<char> marked;
  thread_local std::vector<int> ends, taken;
  thread_local std::vector<Hop> route;
  if (marked.size() < static_cast<std::size_t>(pf.num_endpoints())) marked.resize(static_cast<std::size_t>(pf.num_endpoints()), 0);
  auto clear = [&](const std::vector<int>& set) {
    for (int e : set) marked[static_cast<std::size_t>(e)] = 0;
  };
  ends.clear();
  bool routed = true;
  for (std::size_t p = 0; routed && p < one.phases.size(); ++p) {
    const auto& ph = one.phases[p];
    routed = ph.work.empty();
    for (std::size_t i = 0; routed && i < ph.flows.size(); ++i) {
      const auto& f = ph.flows[i];
      route.clear();
      pf.append_route(f.src, f.dst, route);
      for (const auto& h : route) routed = routed && pf.private_link(h.link);
      for (int e : {f.src, f.dst})
        if (char& m = marked[static_cast<std::size_t>(e)]; !m) m = 1, ends.push_back(e);
    }
  }
  clear(ends);
  if (!routed) return false;
  // A move is one-to-one, so an endpoint already marked belongs to another group.
  taken.clear();
  bool ok = true;
  for (std::size_t k = 0; ok && k < moves.size(); ++k)
    for (std::size_t i = 0; ok && i < ends.size(); ++i) {
      const int e = pf.shift_endpoint(ends[i], moves[k].first, moves[k].second);
      char& m = marked[static_cast<std::size_t>(e)];
      ok = !m;
      if (ok) m = 1, taken.push_back(e);
    }
  clear(taken);
  return ok;
}

// Whether the groups, each `one` moved, cross no link in the same direction within a phase (the
// same group may cross one many times); host work (servers) is not taken apart.
bool apart(const Platform& pf, const LoweredCollective& one, const std::vector<Move>& moves) {
  if (apart_by_endpoints(pf, one, moves)) return true;
  // Owners per link direction, all -1 between calls (only the ones set are cleared).
  thread_local std::vector<int> owner;
  thread_local std::vector<std::size_t> marked;
  thread_local std::vector<Hop> route;
  if (owner.size() < pf.links().size() * 2) owner.resize(pf.links().size() * 2, -1);
  bool ok = true;
  for (const auto& ph : one.phases) {
    ok = ph.work.empty();
    for (std::size_t k = 0; ok && k < moves.size(); ++k)
      for (std::size_t f = 0; ok && f < ph.flows.size(); ++f) {
        route.clear();
        pf.append_route(pf.shift_endpoint(ph.flows[f].src, moves[k].first, moves[k].second),
                        pf.shift_endpoint(ph.flows[f].dst, moves[k].first, moves[k].second), route);
        for (const auto& h : route) {
          int& o = owner[static_cast<std::size_t>(h.link) * 2 + (h.up ? 0 : 1)];
          if (o < 0) {
            o = static_cast<int>(k);
            marked.push_back(static_cast<std::size_t>(h.link) * 2 + (h.up ? 0 : 1));
          } else if (o != static_cast<int>(k)) {
            ok = false;
          }
        }
      }
    for (std::size_t s : marked) owner[s] = -1;
    marked.clear();
    if (!ok) break;
  }
  return ok;
}

// apart(), or what it said before for flows between the same endpoints: a shape's collectives at
// other sizes mostly lower to the same flows, and the check reads every group's routes.
bool apart_as_before(const Platform& pf, const LoweredCollective& one, const std::vector<Move>& moves, ApartMemo& memo) {
  std::vector<int> ends;
  for (const auto& ph : one.phases) {
    for (const auto& f : ph.flows) ends.insert(ends.end(), {f.src, f.dst});
    ends.push_back(ph.work.empty() ? -1 : -2);  // the phase's end
  }
  for (const auto& [e, verdict] : memo.seen)
    if (e == ends) return verdict;
  const bool verdict = apart(pf, one, moves);
  memo.seen.emplace_back(std::move(ends), verdict);
  return verdict;
}

std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}

// Joined, the groups' flows load only their own links, in the order each group's own do, and
// every group's phases last as long as the first's: the join's time is the first group's, joined
// alone (its flows in route order, as the join puts them). `moves`: each group's from the first,
// or nullptr where they are not one group moved.
double moved_groups_time(const Platform& pf, const taskgraph::Collective& c, const std::vector<std::vector<int>>& groups,
                         const std::vector<Move>* moves, ApartMemo* memo, bool* alone) {
  if (alone) *alone = false;
  if (groups.size() > 1 && moves) {
    GroupMerge merge;
    merge.add(lower(pf, c.op, c.algorithm, c.bytes, groups.front()));
    LoweredCollective one = merge.done();
    if (memo ? apart_as_before(pf, one, *moves, *memo) : apart(pf, one, *moves)) {
      if (c.launch_s > 0 && !one.phases.empty()) one.phases.front().latency += c.launch_s;
      if (alone) *alone = true;
      return analytical_time(pf, one);
    }
  }
  return analytical_time(pf, lower(pf, c, groups));
}

}  // namespace

double groups_time(const Platform& pf, const taskgraph::Collective& c, const std::vector<std::vector<int>>& groups,
                   bool* alone) {
  std::vector<Move> moves;
  const bool moved_copies = groups.size() > 1 && by_shape(pf, c) && moves_of(pf, groups, moves);
  return moved_groups_time(pf, c, groups, moved_copies ? &moves : nullptr, nullptr, alone);
}

std::size_t GroupPrices::KeyHash::operator()(const Key& k) const {
  std::uint64_t b = 0, l = 0;
  std::memcpy(&b, &k.bytes, sizeof b);
  std::memcpy(&l, &k.launch, sizeof l);
  std::uint64_t h = mix(mix(mix(mix(1469598103934665603ULL, static_cast<std::uint64_t>(k.op) * 64 + static_cast<std::uint64_t>(k.algorithm)), b), l), k.shape);
  return static_cast<std::size_t>(h);
}

std::size_t GroupPrices::shape(const std::vector<std::vector<int>>& groups) {
  const Move m = to_origin(pf_, groups);
  std::vector<int> ranks;
  for (const auto& g : groups) {
    ranks.push_back(static_cast<int>(g.size()));
    for (int r : g) ranks.push_back(moved(pf_, r, m));
  }
  auto [it, fresh] = ids_.try_emplace(std::move(ranks), shapes_.size());
  if (fresh) {
    auto& sh = shapes_.emplace_back();
    sh.groups = groups;
    for (auto& g : sh.groups)
      for (int& r : g) r = moved(pf_, r, m);
  }
  return it->second;
}

double GroupPrices::time(const taskgraph::Collective& c, const std::vector<std::vector<int>>& groups) {
  if (!by_shape(pf_, c)) return analytical_time(pf_, lower(pf_, c, groups));
  return time(c, groups, shape(groups));
}

double GroupPrices::time(const taskgraph::Collective& c, const std::vector<std::vector<int>>& groups, std::size_t id) {
  if (!by_shape(pf_, c)) return analytical_time(pf_, lower(pf_, c, groups));
  auto [it, fresh] = prices_.try_emplace(Key{static_cast<int>(c.op), static_cast<int>(c.algorithm), c.bytes, c.launch_s, id}, 0.0);
  if (!fresh) return it->second;
  auto& sh = shapes_[id];
  const algorithms::RememberHops remember(hops_);
  if (sh.congruent < 0) sh.congruent = sh.groups.size() > 1 && moves_of(pf_, sh.groups, sh.moves) ? 1 : 0;
  if (const auto t = sized_time(pf_, c.op, c.algorithm, c.bytes, sh.groups.front(), sized(sh, c), c.launch_s)) {
    alone_ += sh.groups.size() > 1 ? 1 : 0;
    return it->second = *t;
  }
  bool one = false;
  it->second = moved_groups_time(pf_, c, sh.groups, sh.congruent ? &sh.moves : nullptr, &sh.apart, &one);
  alone_ += one ? 1 : 0;
  ++lowered_;
  return it->second;
}

// One group's lowering at one byte per candidate, as lines, where the other groups are it moved
// and cross no link the same way as it under every candidate (their time is its own).
const std::vector<TimeLines>& GroupPrices::sized(Shape& sh, const taskgraph::Collective& c) {
  auto [it, fresh] = sh.sized.try_emplace({static_cast<int>(c.op), static_cast<int>(c.algorithm)});
  const bool moved = sh.groups.size() > 1;
  if (!fresh || (moved && !sh.congruent)) return it->second;
  std::vector<TimeLines> lines;
  for (Algorithm a : sized_candidates(pf_, c.op, c.algorithm, sh.groups.front())) {
    GroupMerge merge;  // in the order the plain lowering joins groups' flows
    merge.add(lower_one_byte(pf_, c.op, a, sh.groups.front()));
    const LoweredCollective one = merge.done();
    if (moved && !apart_as_before(pf_, one, sh.moves, sh.apart)) return it->second;
    auto l = time_lines(pf_, one);
    if (!l) return it->second;
    lines.push_back(std::move(*l));
  }
  return it->second = std::move(lines);
}

}  // namespace dtsim::network
