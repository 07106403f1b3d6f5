// Expert parallelism in the emitter (Megatron-Core's layout): the MoE layers' grid of
// expert_tensor x expert x expert-data ranks folds over each stage's tensor x data ranks in
// Megatron-Core's expert order tp-ep-dp (megatron/core/parallel_state.py, initialize_model_parallel:
// the expert RankGenerator's order "tp-ep-dp-pp" over the same ranks as the dense "tp-cp-dp-pp"),
// so an expert-parallel group is expert consecutive blocks of expert_tensor ranks: inside one node
// whenever expert x expert_tensor GPUs fit in it. With expert_tensor = tensor (the default) that is
// consecutive context and data ranks of one tensor rank. Expert gradients are summed over the expert-data
// ranks holding the same experts, dense ones over all data-parallel GPUs. The MoE passes and the
// expert gradients' sync are strategies/units/experts.cpp.
#include "strategies/memory.hpp"
#include "strategies/stack_memory.hpp"
#include "strategies/planner.hpp"
#include "strategies/units/units.hpp"
#include "strategies/settings.hpp"

namespace dtsim::strategies {

// The GPU of expert coordinates (expert tensor rank, expert rank, expert-data rank) on stage s:
// the stage's rank i = et + ETP (ep + EP edp) is dense rank t + tensor (c + context d).
int Planner::expert_gpu(int s, int et, int ep, int edp) const {
  const int i = et + p_.expert_tensor_size() * (ep + p_.expert * edp);
  const int rest = i / p_.tensor;
  return place_.gpu(rest / p_.context, s, i % p_.tensor, rest % p_.context);
}

std::vector<int> Planner::expert_groups(int s) {
  auto [it, fresh] = expert_groups_.try_emplace(s);
  if (fresh)
    for (int et = 0; et < p_.expert_tensor_size(); ++et)
      for (int edp = 0; edp < p_.expert_data(); ++edp) {
        std::vector<int> ranks;
        for (int ep = 0; ep < p_.expert; ++ep) ranks.push_back(expert_gpu(s, et, ep, edp));
        it->second.push_back(plan_.graph.add_group(std::move(ranks)));
      }
  return it->second;
}

std::vector<int> Planner::expert_data_groups(int s) {
  auto [it, fresh] = expert_data_groups_.try_emplace(s);
  if (fresh)
    for (int et = 0; et < p_.expert_tensor_size(); ++et)
      for (int ep = 0; ep < p_.expert; ++ep) {
        std::vector<int> ranks;
        for (int edp = 0; edp < p_.expert_data(); ++edp) ranks.push_back(expert_gpu(s, et, ep, edp));
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
  if (experts > 0 && p_.expert_data() > 1) one(expert_data_groups(s), experts, expert_label);
  return stream;
}

// The parameters one GPU's optimizer updates: ZeRO shards dense ones over the data-parallel GPUs
// and expert ones over the expert-data-parallel GPUs.
double Planner::update_shard(const Layers& ls) const {
  const double all = layer_params(ls);
  if (bf16_optimizer(p_, t_.precision)) return all / grad_ranks();  // it shards its masters and state
  if (p_.zero_stage < 1) return all;
  double experts = 0;
  if (p_.expert > 1)
    for (const auto* l : ls) experts += l->expert_params();
  return (all - experts) / shard_ranks() + experts / p_.expert_data();
}

// Megatron-LM builds the last stage's output layer (tied) or MTP embedding as a parameter of its
// own, initialised from the first stage's table and kept equal by summing the two gradients
// (finalize_model_grads, _allreduce_word_embedding_grads); DeepSpeed's TiedLayerSpec does the same.
double Planner::shared_table_copy(int s) const {
  if (p_.pipeline <= 1 || g_.tied_params <= 0) return 0;
  const int last = stage_of(k_.chunks - 1);
  return s == last && stage_of(0) != last ? g_.tied_params : 0.0;
}

MemoryBreakdown Planner::state_memory(const Layers& ls, double copies) const {
  const double all = layer_params(ls) + copies;
  auto states = [&](double params, int dp) {
    return stack_state_memory(params, t_.precision, t_.optimizer, p_.zero_stage, dp, p_.framework.framework, t_.memory.buffers,
                              held_grad_buffer_bytes(p_.framework, p_.zero_stage));
  };
  if (p_.expert <= 1) return states(all, shard_ranks());
  double experts = 0;
  for (const auto* l : ls) experts += l->expert_params();
  MemoryBreakdown m = states(all - experts, grad_ranks());
  const MemoryBreakdown e = states(experts, p_.expert_data());
  m.params += e.params;
  m.gradients += e.gradients;
  m.optimizer += e.optimizer;
  return m;
}

}  // namespace dtsim::strategies
