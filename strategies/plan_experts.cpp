// Expert parallelism in the planner (Megatron-Core's layout): the `expert` GPUs of an
// expert-parallel group are consecutive data-parallel ranks of one stage and tensor rank; each MoE
// layer dispatches its tokens to the GPUs holding their experts and combines the results by
// all-to-all over that group, forward and backward; expert gradients are summed over the
// data / expert GPUs holding the same experts, dense ones over all data-parallel GPUs.
#include <algorithm>
#include <cmath>
#include <random>

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

// How many times its even share of the tokens the most loaded GPU of an expert-parallel group
// gets in this layer. Each expert's share is 1 + skew x z (z standard normal, Box-Muller on
// std::mt19937_64, whose output the standard fixes, so every platform draws the same), at least
// 0, normalised to a mean of 1; a GPU's load is the mean of its experts'. With a capacity factor
// every expert computes its padded capacity whatever it gets (the excess is dropped), so no GPU
// is slower than another.
double Planner::slowest_expert_load(const models::Layer& l) const {
  if (p_.expert_skew <= 0 || p_.expert <= 1 || l.experts.capacity > 0) return 1.0;
  const auto index = static_cast<std::uint64_t>(&l - g_.layers.data());
  std::mt19937_64 rng(p_.expert_seed * 0x9E3779B97F4A7C15ull + index);
  auto uniform = [&] { return (static_cast<double>(rng() >> 11) + 0.5) * 0x1.0p-53; };
  const std::int64_t experts = l.experts.local_experts * p_.expert;
  std::vector<double> share(static_cast<std::size_t>(experts));
  double sum = 0;
  for (auto& w : share) {
    const double z = std::sqrt(-2.0 * std::log(uniform())) * std::cos(2.0 * M_PI * uniform());
    w = std::max(0.0, 1.0 + p_.expert_skew * z);
    sum += w;
  }
  if (sum <= 0) return 1.0;
  double worst = 0;
  for (int r = 0; r < p_.expert; ++r) {
    double load = 0;
    for (std::int64_t i = 0; i < l.experts.local_experts; ++i) load += share[static_cast<std::size_t>(r * l.experts.local_experts + i)];
    worst = std::max(worst, load / static_cast<double>(l.experts.local_experts) / (sum / static_cast<double>(experts)));
  }
  return worst;
}

// One layer's pass on stage s. An MoE layer under expert parallelism runs as its part before the
// dispatch, the dispatch all-to-all, its experts, the combine all-to-all and its part after (in
// backward the same, mirrored). The all-to-alls name every expert-parallel group of the stage, so
// all their flows share the network. When the router's skew gives another GPU of the group more
// tokens than this one, that GPU's expert work runs too, at its load, and the combine waits for
// it: the slowest expert GPU sets the pace, and what this GPU waits is straggler wait.
int Planner::layer_pass(int s, int chunk, bool forward, const models::Layer* l, std::vector<int> deps, const std::string& tag) {
  const int tpg = tp_group_[static_cast<std::size_t>(s)];
  const std::string what = (forward ? "fwd " : "bwd ") + l->name + tag;
  if (!l->experts.moe() || p_.expert <= 1) return compute(s, pass_work(forward, chunk, l, tpg), std::move(deps), what);
  auto [it, fresh] = moe_works_.try_emplace({forward, l, tpg}, std::array<int, 4>{-1, -1, -1, -1});
  if (fresh) {
    auto works = moe_pass_works(*l, forward, g_, p_, tpg);
    const double load = slowest_expert_load(*l);
    if (load > 1.0 + 1e-9) {
      taskgraph::Work slow = works[1];
      slow.name += " (most loaded GPU)";
      for (auto& k : slow.kernels) k = models::scale_expert_tokens(k, load);
      it->second[3] = table_.get(std::move(slow));
    }
    for (std::size_t i = 0; i < 3; ++i) it->second[i] = table_.get(std::move(works[i]));
  }
  if (!forward && p_.recompute == Recompute::Full) {  // the forward again, all-to-alls included
    const int again = layer_pass(s, chunk, true, l, std::move(deps), tag + " recompute");
    deps = {again};
  }
  const auto& w = it->second;
  const int before = compute(s, w[0], std::move(deps), what + (forward ? " before dispatch" : " before combine"));
  // With every replica emitted, the replicas of one expert-parallel group join its all-to-all.
  const bool every = replicas_join();
  auto all_to_all = [&](std::vector<int> after, const std::string& label) {
    std::vector<int> groups = expert_groups(s);
    if (every) {
      const int per_t = p_.data / p_.expert, block = d_ / p_.expert;
      std::vector<int> mine;
      for (int t = 0; t < p_.tensor; ++t) mine.push_back(groups[static_cast<std::size_t>(t * per_t + block)]);
      groups = std::move(mine);
    }
    return group_collective(s, {CollectiveOp::AllToAll, taskgraph::Algorithm::Direct, std::move(groups), l->experts.dispatch_bytes},
                            std::move(after), label + " " + l->name + tag, every ? 1 + d_ / p_.expert : 0);
  };
  const int first = all_to_all({before}, forward ? "dispatch" : "combine grad");
  std::vector<int> done{compute(s, w[1], {first}, what + " experts")};
  if (w[3] >= 0) {
    const int slow_rank = place_.gpu(d_ + 1, s, 0);  // stands for the group's most loaded GPU
    std::vector<int> after{first};
    if (auto prev = last_slow_.find(s); prev != last_slow_.end()) after.push_back(prev->second);
    last_slow_[s] = plan_.graph.add_compute(slow_rank, w[3], Category::Compute, what + " experts, most loaded GPU", after);
    done.push_back(last_slow_[s]);
  }
  const int second = all_to_all(done, forward ? "combine" : "dispatch grad");
  return compute(s, w[2], {second}, what + (forward ? " after combine" : " after dispatch"));
}

// Expert gradients, bucket by bucket as backward produces them, summed (or reduce-scattered under
// ZeRO-1 and ZeRO-2) over the expert-data-parallel groups. They queue among themselves but beside the dense
// buckets (other process groups, as Megatron-Core's expert-data-parallel group is); the last waits
// for the dense ones too, so that the optimizer after it has every gradient.
void Planner::synchronise_expert_gradients(int s) {
  if (p_.data / p_.expert <= 1) return;
  const Layers mine = stage_layers(s);
  const double gbytes = grad_bytes_per_param(t_.precision);
  const auto buckets = make_buckets(mine, gbytes, p_.bucket_bytes, p_.first_bucket_bytes, BucketParams::Expert);
  const CollectiveOp op = p_.zero_stage == 0 ? CollectiveOp::AllReduce : CollectiveOp::ReduceScatter;
  const int dense_last = last_comm_[static_cast<std::size_t>(s)];
  int previous = -1;
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    std::vector<int> deps;
    for (std::size_t d = 0; d < replica_final_.size(); ++d) {
      if (p_.overlap_grad_reduce) deps.push_back(replica_final_[d].at(mine[static_cast<std::size_t>(buckets[b].ready_after_layer)]));
      else deps.push_back(replica_last_[d][static_cast<std::size_t>(s)]);
    }
    if (previous >= 0) deps.push_back(previous);
    if (b + 1 == buckets.size() && dense_last >= 0) deps.push_back(dense_last);
    previous = collective(op, expert_data_groups(s), buckets[b].bytes, deps,
                          std::string(taskgraph::to_string(op)) + " expert bucket " + std::to_string(b));
  }
  if (previous >= 0) last_comm_[static_cast<std::size_t>(s)] = previous;
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

// ZeRO-1 and ZeRO-2: every GPU gathers the expert weights the others of its expert-data-parallel
// group updated.
void Planner::gather_expert_params(int s, const std::vector<int>& deps) {
  if (p_.data / p_.expert <= 1) return;
  double experts = 0;
  for (const auto* l : stage_layers(s)) experts += l->expert_params();
  collective(CollectiveOp::AllGather, expert_data_groups(s), experts * weight_bytes_per_param(t_.precision), deps,
             "zero gather expert params");
}

// The parameters one GPU's optimizer updates: ZeRO shards dense ones over the data-parallel GPUs
// and expert ones over the expert-data-parallel GPUs.
double Planner::update_shard(const Layers& ls) const {
  const double all = layer_params(ls);
  if (p_.zero_stage < 1) return all;
  double experts = 0;
  if (p_.expert > 1)
    for (const auto* l : ls) experts += l->expert_params();
  return (all - experts) / grad_ranks() + experts / (p_.data / p_.expert);
}

MemoryBreakdown Planner::state_memory(const Layers& ls) const {
  const double all = layer_params(ls);
  auto states = [&](double params, int dp) {
    return stack_state_memory(params, t_.precision, t_.optimizer, p_.zero_stage, dp, p_.framework.framework, t_.memory.buffers);
  };
  if (p_.expert <= 1) return states(all, grad_ranks());
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
