#pragma once
// The planner that turns a model and a strategy into a task graph, shared by the files that
// implement it: plan.cpp (passes, schedule, memory) and plan_updates.cpp (gradient
// synchronisation and optimizer steps).
#include <cstdint>
#include <array>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "strategies/placement.hpp"
#include "strategies/plan.hpp"
#include "strategies/schedule.hpp"
#include "strategies/works.hpp"

namespace dtsim::strategies {

using taskgraph::Category;
using taskgraph::CollectiveOp;
using Layers = std::vector<const models::Layer*>;

double layer_params(const Layers& ls);

class Planner {
 public:
  Planner(const models::ModelGraph& g, const ParallelismSpec& p, const TrainingSpec& t, const HostSpec& host)
      : g_(g), p_(p), t_(t), host_(host), place_(p), table_(plan_.graph) {}

  Plan run();

 private:
  int rep(int s) const { return place_.gpu(d_, s, 0); }
  int stage_of(int chunk) const { return chunk % p_.pipeline; }
  Layers stage_layers(int s) const;  // all of a stage's chunks, in model order
  int p2p_group(int from, int to);
  std::vector<int> data_groups(int s);
  int compute(int s, int work, std::vector<int> deps, const std::string& label);
  int pass_work(bool forward, int chunk, const models::Layer* layer, int tpg);
  int send(int from, int to, int after, double tensor_bytes, const std::string& label);
  int collective(CollectiveOp op, std::vector<int> groups, double bytes, std::vector<int> deps, const std::string& label);
  bool ready(int s, const PipeOp& op) const;
  void emit(int s, std::size_t index, const PipeOp& op);
  void synchronise_gradients(int s);
  void step_optimizer(int s, int embedding_sync);
  void step_optimizer_per_bucket(int s);
  void step_optimizer_one(int s, int embedding_sync);
  void emit_passes();
  Plan finish();
  void local_optimizer();
  void asynchronous_update(int& previous_exchange);
  MemoryBreakdown stage_memory(int s) const;
  // Expert parallelism (plan_experts.cpp).
  std::vector<int> expert_groups(int s);
  std::vector<int> expert_data_groups(int s);
  int layer_pass(int s, int chunk, bool forward, const models::Layer* l, std::vector<int> deps, const std::string& tag);
  void synchronise_expert_gradients(int s);
  void gather_expert_params(int s, const std::vector<int>& deps);
  double update_shard(const Layers& ls) const;
  MemoryBreakdown state_memory(const Layers& ls) const;
  double slowest_expert_load(const models::Layer& l) const;

  const models::ModelGraph& g_;
  const ParallelismSpec& p_;
  const TrainingSpec& t_;
  const HostSpec& host_;
  Placement place_;
  Plan plan_;
  WorkTable table_;

  int chunks_ = 1, v_ = 1;
  std::int64_t m_ = 1;
  std::vector<Layers> chunk_layers_;
  std::vector<std::vector<PipeOp>> seq_;
  std::vector<std::map<int, std::size_t>> last_backward_;  // per stage: chunk -> index of its final backward
  std::vector<int> tp_group_, last_compute_, last_comm_, last_send_;
  std::vector<std::vector<int>> fwd_out_, bwd_out_;  // per model chunk, per micro-batch: task handing on
  std::map<const models::Layer*, int> final_backward_;
  int last_load_ = -1;
  int d_ = 0;  // the replica being emitted
  std::vector<std::map<const models::Layer*, int>> replica_final_;
  // Priority buckets: each replica's first forward of every layer, and each bucket's collective.
  std::map<const models::Layer*, int> first_forward_;
  std::vector<std::map<const models::Layer*, int>> replica_first_forward_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_comm_;
  std::vector<std::vector<int>> replica_last_;
  std::map<std::pair<int, int>, int> p2p_groups_;
  std::map<int, std::vector<int>> data_groups_;
  // (forward, chunk, one layer or null for the whole chunk, tensor group) -> its shared work.
  std::map<std::tuple<bool, int, const models::Layer*, int>, int> pass_works_;
  int load_works_[2] = {-1, -1};  // the prefetched first micro-batch, then every later load
  // Expert parallelism: per stage, the all-to-all groups and the expert-data-parallel groups; per
  // (forward, layer, tensor group) an MoE layer's works: before the dispatch, the experts, after
  // the combine, and the experts at the most loaded GPU's load (-1: none slower); per stage the
  // last expert task of that GPU.
  std::map<int, std::vector<int>> expert_groups_, expert_data_groups_;
  std::map<std::tuple<bool, const models::Layer*, int>, std::array<int, 4>> moe_works_;
  std::map<int, int> last_slow_;
};

}  // namespace dtsim::strategies
