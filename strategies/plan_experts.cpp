// Expert parallelism in the emitter (Megatron-Core's layout): the `expert` GPUs of an
// expert-parallel group are consecutive data-parallel ranks of one stage and tensor rank; expert
// gradients are summed over the data / expert GPUs holding the same experts, dense ones over all
// data-parallel GPUs. The MoE passes and the expert gradients' sync are strategies/units/experts.cpp.
#include "strategies/memory.hpp"
#include "strategies/stack_memory.hpp"
#include "strategies/planner.hpp"

namespace dtsim::strategies {

std::vector<int> Planner::expert_groups(int s) {
  auto [it, fresh] = expert_groups_.try_emplace(s);
  if (fresh)
    for (int t = 0; t < p_.tensor; ++t)
      for (int first = 0; first < p_.data; first += p_.expert) {
        std::vector<int> ranks;
        for (int d = first; d < first + p_.expert; ++d) ranks.push_back(place_.gpu(d, s, t));
        it->second.push_back(plan_.graph.add_group(std::move(ranks)));
      }
  return it->second;
}

std::vector<int> Planner::expert_data_groups(int s) {
  auto [it, fresh] = expert_data_groups_.try_emplace(s);
  if (fresh)
    for (int t = 0; t < p_.tensor; ++t)
      for (int e = 0; e < p_.expert; ++e) {
        std::vector<int> ranks;
        for (int d = e; d < p_.data; d += p_.expert) ranks.push_back(place_.gpu(d, s, t));
        it->second.push_back(plan_.graph.add_group(std::move(ranks)));
      }
  return it->second;
}

// ZeRO-2 and ZeRO-3 under expert parallelism: dense parameters, their gradients and optimizer
// state sharded over the data-parallel group, the experts' over the expert-data-parallel group
// (the data / expert GPUs holding the same experts). DeepSpeed's ZeRO-1/2 optimizer reduces and
// partitions an MoE parameter group over its expert_dp_process_group (runtime/zero/
// stage_1_and_2.py, real_dp_process_group); torchtitan's FSDP2 (ZeRO-3) shards the experts over
// its "dp_shard_mod_ep" mesh and the rest over the whole data-parallel mesh (apply_fsdp in the
// MoE models' parallelize.py). So
// a collective over a layer's parameters is two: the dense part over the data-parallel groups,
// then the experts' over the expert-data-parallel groups (none when data = expert: every GPU holds
// its experts whole). Both queue on the stage's communication stream after `after` (-1: none);
// returns the last.
int Planner::dense_and_expert_collective(int s, CollectiveOp op, double dense, double experts, double bytes_per_param, int after,
                                         const std::string& dense_label, const std::string& expert_label) {
  int& stream = last_comm_[static_cast<std::size_t>(s)];
  auto one = [&](std::vector<int> groups, double params, const std::string& label) {
    std::vector<int> deps;
    if (after >= 0) deps.push_back(after);
    if (stream >= 0) deps.push_back(stream);
    stream = group_collective(s, op, std::move(groups), params * bytes_per_param, std::move(deps), label);
  };
  one(data_groups(s), dense, dense_label);
  if (experts > 0 && p_.data / p_.expert > 1) one(expert_data_groups(s), experts, expert_label);
  return stream;
}

// The parameters one GPU's optimizer updates: ZeRO shards dense ones over the data-parallel GPUs
// and expert ones over the expert-data-parallel GPUs.
double Planner::update_shard(const Layers& ls) const {
  const double all = layer_params(ls);
  if (p_.zero_stage < 1) return all;
  double experts = 0;
  if (p_.expert > 1)
    for (const auto* l : ls) experts += l->expert_params();
  return (all - experts) / shard_ranks() + experts / (p_.data / p_.expert);
}

MemoryBreakdown Planner::state_memory(const Layers& ls) const {
  const double all = layer_params(ls);
  auto states = [&](double params, int dp) {
    return stack_state_memory(params, t_.precision, t_.optimizer, p_.zero_stage, dp, p_.framework.framework, t_.memory.buffers);
  };
  if (p_.expert <= 1) return states(all, shard_ranks());
  double experts = 0;
  for (const auto* l : ls) experts += l->expert_params();
  MemoryBreakdown m = states(all - experts, grad_ranks());
  const MemoryBreakdown e = states(experts, p_.data / p_.expert);
  m.params += e.params;
  m.gradients += e.gradients;
  m.optimizer += e.optimizer;
  return m;
}

}  // namespace dtsim::strategies
