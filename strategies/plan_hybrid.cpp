// Hybrid sharding (HSDP) in the emitter: ZeRO-3 inside groups of shard_size data ranks, replicas
// across them. PyTorch FSDP2 reduces a unit's gradients in two steps (torch/distributed/fsdp/
// _fully_shard/_fsdp_collectives.py, foreach_reduce): a reduce-scatter in the shard group, then an
// all-reduce of the resulting shard across the replicate group; its all-gathers stay in the shard
// group (_fsdp_param_group.py, FSDPParamGroup.unshard over the shard process group).
#include "strategies/planner.hpp"

namespace dtsim::strategies {

std::vector<int> Planner::shard_groups(int s) {
  if (!hybrid_shard(p_)) return data_groups(s);
  auto [it, fresh] = shard_groups_.try_emplace(s);
  if (fresh)
    for (int t = 0; t < p_.tensor; ++t)
      for (int first = 0; first < p_.data; first += p_.shard_size)
        it->second.push_back(plan_.graph.add_group(place_.shard_group(s, t, first, p_.shard_size)));
  return it->second;
}

std::vector<int> Planner::replicate_groups(int s) {
  auto [it, fresh] = replicate_groups_.try_emplace(s);
  if (fresh)
    for (int t = 0; t < p_.tensor; ++t)
      for (int c = 0; c < p_.context; ++c)
        for (int j = 0; j < p_.shard_size; ++j)
          it->second.push_back(plan_.graph.add_group(place_.replicate_group(s, t, c, j, p_.shard_size)));
  return it->second;
}

int Planner::zero3_collective(int s, CollectiveOp op, double params, double bytes_per_param, int after, const std::string& label) {
  int& stream = last_comm_[static_cast<std::size_t>(s)];
  int last = -1;
  auto one = [&](CollectiveOp o, std::vector<int> groups, double bytes, const std::string& name) {
    std::vector<int> deps;
    if (after >= 0) deps.push_back(after);
    if (stream >= 0) deps.push_back(stream);
    last = stream = group_collective(s, o, std::move(groups), bytes, std::move(deps), name);
  };
  if (shard_ranks() > 1) one(op, shard_groups(s), params * bytes_per_param, label);
  if (op == CollectiveOp::ReduceScatter && hybrid_shard(p_))
    one(CollectiveOp::AllReduce, replicate_groups(s), params * bytes_per_param / shard_ranks(), label + " across replicas");
  return last;
}

}  // namespace dtsim::strategies
