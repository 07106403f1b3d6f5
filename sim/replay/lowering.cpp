#include "sim/replay/lowering.hpp"

namespace dtsim::replay {

int ChainRoutes::add(const Hops& hop_list) {
  auto [at, added] = id_of.try_emplace(hop_list, static_cast<int>(hops.size()));
  if (added) hops.push_back(&at->first);
  return at->second;
}

PreparedOf prepare(const ReplayInput& in, ChainRoutes& chains,
                   std::unordered_map<const taskgraph::Collective*, Prepared>& store, std::map<int, Prepared>& copies) {
  const auto& g = in.graph;
  PreparedOf out;
  out.of.assign(g.tasks.size(), 0);
  for (std::size_t i = 0; i < g.tasks.size(); ++i) {
    const auto& t = g.tasks[i];
    if (!t.is_collective && t.category == taskgraph::Category::Copy && g.works[static_cast<std::size_t>(t.work)].copy_bytes > 0) {
      auto [it, fresh] = copies.try_emplace(t.work);
      if (fresh) {
        const auto& w = g.works[static_cast<std::size_t>(t.work)];
        it->second.lowered = network::lower_host_copy(in.platform, w.copy_bytes, g.groups[static_cast<std::size_t>(w.copy_group)], w.copy_to_host);
        for (const auto& ph : it->second.lowered.phases) {
          it->second.chained.emplace_back(ph.flows.size(), 0);
          it->second.chain_pair.emplace_back();
        }
        out.add(it->second);
      }
      out.of[i] = it->second.id;
      continue;
    }
    if (!t.is_collective) continue;
    if (in.step_tasks > 0 && i >= in.step_tasks) {  // a copy of step 0's task
      out.of[i] = out.of[i % in.step_tasks];
      continue;
    }
    // TaskGraph keeps each distinct collective once, so its address names its value.
    auto [it, fresh] = store.try_emplace(&t.collective());
    if (!fresh) {
      out.of[i] = it->second.id;
      continue;
    }
    out.of[i] = out.add(it->second);
    auto& prep = it->second;
    prep.lowered = network::lower(in.platform, t.collective(), groups_of(g, t.collective()));
    for (const auto& ph : prep.lowered.phases) {
      prep.chained.emplace_back(ph.flows.size(), 0);
      auto& ids = prep.chain_pair.emplace_back();
      for (const auto& ch : ph.chains) {
        std::vector<std::pair<int, int>> hop_list;
        for (std::size_t f = ch.first; f < ch.first + ch.count; ++f) {
          hop_list.emplace_back(ph.flows[f].src, ph.flows[f].dst);
          prep.chained.back()[f] = 1;
        }
        ids.push_back(chains.add(hop_list));
      }
    }
  }
  return out;
}

}  // namespace dtsim::replay
