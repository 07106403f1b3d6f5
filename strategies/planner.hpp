#pragma once
// The planner that turns a model and a strategy into a task graph, shared by the files that
// implement it: plan.cpp (passes and the step), plan_layout.cpp (chunks and stages),
// plan_memory.cpp (memory per stage), plan_updates.cpp (gradient synchronisation and optimizer
// steps) and the other plan_*.cpp.
#include <cstdint>
#include <array>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "strategies/layout.hpp"
#include "strategies/placement.hpp"
#include "strategies/plan.hpp"
#include "strategies/schedule.hpp"
#include "strategies/works.hpp"

namespace dtsim::strategies {

using taskgraph::Category;
using taskgraph::CollectiveOp;
// upstream_grad: the gradient this backward waits for was sent in the previous step's window.
inline constexpr int kInPreviousStep = -3;

double layer_params(const Layers& ls);

class Planner {
 public:
  // `k`: layout_of(g, p, t), laid out over `g`.
  Planner(const models::ModelGraph& g, Layout k, const ParallelismSpec& p, const TrainingSpec& t, const HostSpec& host)
      : g_(g), k_(std::move(k)), p_(p), t_(t), host_(host), place_(k_.place), table_(plan_.graph) {}

  Plan run();
  // run() without the task graph: micro-batches, chunks, memory and FLOPs (plan_layout.cpp).
  PlanLayout layout();

 private:
  void start_layout();
  int rep(int s) const { return place_.gpu(d_, s, 0); }
  // Ranks that hold the same parameters and sum their gradients: data x context.
  int grad_ranks() const { return k_.grad_ranks; }
  int stage_of(int chunk) const { return k_.stage_of(chunk); }
  Layers stage_layers(int s) const { return k_.stage_layers(s); }
  int p2p_group(int from, int to);
  int replica_tp_group(int s);
  std::vector<int> data_groups(int s);
  int compute(int s, int work, std::vector<int> deps, const std::string& label);
  int pass_work(bool forward, int chunk, const models::Layer* layer, int tpg);
  int send(int from, int to, int after, double tensor_bytes, const std::string& label);
  int collective(CollectiveOp op, std::vector<int> groups, double bytes, std::vector<int> deps, const std::string& label);
  // Every replica emitted under ZeRO-2/3 (plan_replicas.cpp): a collective over the data-parallel
  // groups in the passes is one task every replica joins.
  bool replicas_join() const;
  void start_replica();
  int group_collective(int s, taskgraph::Collective c, std::vector<int> deps, const std::string& label, int lane = 0);
  int lane_creator(int lane) const;
  int group_collective(int s, CollectiveOp op, std::vector<int> groups, double bytes, std::vector<int> deps, const std::string& label) {
    return group_collective(s, {op, p_.algorithm, std::move(groups), bytes}, std::move(deps), label);
  }
  void order_tasks();
  // ZeRO-2 keeps only its shard of the gradients, so every micro-batch but the last reduces them.
  void zero2_reduce(int s, const Layers& layers, int after, double gbytes, const std::string& tag);
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
  // plan_framework.cpp: ZeRO-3 as DeepSpeed and FSDP run it, PCIe copies of offload.
  bool framework_zero3() const;
  bool pipeline_reduce_after_flush() const;
  double pipeline_reduce_bytes() const;
  void emit_sharded(int s, int j, const PipeOp& op, std::vector<int> cross, const std::string& tag);
  int sharded_collective(int s, CollectiveOp op, double bytes, std::vector<int> deps, const std::string& label);
  int pcie_copy(int s, double bytes, std::vector<int> deps, bool to_host, const std::string& label);
  void offload_layer(int s, int j, const PipeOp& op, const models::Layer* l, int pass);
  void fetch_layer(int s, int j, const PipeOp& op, const models::Layer* l, std::vector<int>& cross);
  void step_optimizer_on_host(int s, int embedding_sync);
  // Schedules beyond 1F1B (plan_schedules.cpp).
  int upstream_grad(int j, const PipeOp& op) const;
  int& grad_out(int j, const PipeOp& op);
  int part_work(PipeOp::Part part, int chunk, int tpg);
  void emit_weight_pass(int s, std::size_t index, const PipeOp& op);
  void update_after_backward(int s, int after);
  void link_previous_step();
  double activation_change(int s, const PipeOp& op, double a) const;
  double live_before_window(int s) const;
  // Expert parallelism (plan_experts.cpp).
  std::vector<int> expert_groups(int s);
  std::vector<int> expert_data_groups(int s);
  int layer_pass(int s, int chunk, bool forward, const models::Layer* l, std::vector<int> deps, const std::string& tag);
  void synchronise_expert_gradients(int s);
  void gather_expert_params(int s, const std::vector<int>& deps);
  int dense_and_expert_collective(int s, CollectiveOp op, double dense, double experts, double bytes_per_param, int after,
                                  const std::string& dense_label, const std::string& expert_label);
  double update_shard(const Layers& ls) const;
  MemoryBreakdown state_memory(const Layers& ls) const;
  double slowest_expert_load(const models::Layer& l) const;

  const models::ModelGraph& g_;
  const Layout k_;
  const ParallelismSpec& p_;
  const TrainingSpec& t_;
  const HostSpec& host_;
  const Placement& place_;
  Plan plan_;
  WorkTable table_;

  // Each chunk's kept activations: the memory walks ask for them at every pass of the schedule.
  std::vector<double> chunk_kept_;
  double chunk_kept(int chunk, int s) const { return chunk_kept_[static_cast<std::size_t>(chunk * p_.pipeline + s)]; }
  std::vector<std::vector<PipeOp>> seq_;
  std::vector<std::map<int, std::size_t>> last_backward_;  // per stage: chunk -> index of its final backward
  std::vector<int> tp_group_, last_compute_, last_comm_, last_send_;
  std::vector<ContextGroups> cp_groups_;  // per stage
  std::vector<std::vector<int>> fwd_out_, bwd_out_;  // per model chunk, per micro-batch: task handing on
  std::map<const models::Layer*, int> final_backward_;
  int last_load_ = -1, first_load_ = -1;  // this replica's loads of the step
  int d_ = 0;  // the replica being emitted
  std::vector<std::map<const models::Layer*, int>> replica_final_;
  // Priority buckets: each replica's first forward of every layer, and each bucket's collective.
  std::map<const models::Layer*, int> first_forward_;
  std::vector<std::map<const models::Layer*, int>> replica_first_forward_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_comm_;
  std::vector<std::vector<int>> replica_last_;
  std::map<std::pair<int, int>, int> p2p_groups_;  // by (GPU from, GPU to)
  std::map<std::pair<int, int>, int> replica_tp_groups_;  // by (replica, stage), replicas after 0
  std::map<int, std::vector<int>> data_groups_;
  // (forward, chunk, one layer or null for the whole chunk, tensor group) -> its shared work.
  std::map<std::tuple<bool, int, const models::Layer*, int>, int> pass_works_;
  int load_work_ = -1;  // one micro-batch's load
  // ZeRO-3 as the framework runs it (one pipeline stage): each use's gather, the gathers of the
  // micro-batch being emitted, the reduce stream and the end-of-backward synchronisation.
  std::vector<int> z3_wait_;
  std::vector<Gather> z3_gathers_;
  std::size_t z3_forward_uses_ = 0;
  // per micro-batch: each gather's task, and the compute task before its first use
  std::map<std::int64_t, std::vector<int>> z3_gather_task_, z3_gather_pred_;
  int z3_last_rs_ = -1, z3_sync_ = -1;
  std::vector<ParamUse> z3_uses_;
  std::map<std::tuple<const models::Layer*, bool, std::size_t>, int> segment_works_;
  // Offload's PCIe copy streams per (replica, stage) (host to device, device to host: each GPU
  // has its own copy engines) and each pass's offloaded copy.
  std::map<std::pair<int, int>, std::array<int, 2>> copy_streams_;
  std::map<std::pair<int, int>, int> copy_groups_;  // (replica, stage) -> the GPUs copying together
  std::map<int, int> copy_together_groups_;        // stage -> every replica's GPUs
  std::map<std::tuple<int, int, const models::Layer*>, int> act_down_;  // (chunk, micro-batch, layer) -> copy to host
  std::vector<int> prev_compute_;                // per stage: the compute task before the last one
  int tied_sync_ = -1;  // DeepSpeed's pipeline: the tied weights' reduction the stages' reductions follow
  // Asynchronous schedules: per chunk, per micro-batch, the transfer of the gradient of the
  // previous step's micro-batch; and the backwards waiting for one of the previous step's
  // (task, chunk whose transfer it waits for, micro-batch).
  std::vector<std::vector<int>> bwd_prev_out_;
  std::vector<std::tuple<int, int, int>> after_previous_;
  std::map<std::tuple<int, int, int>, int> part_works_;  // (part, chunk, tensor group) -> work
  // Expert parallelism: per stage, the all-to-all groups and the expert-data-parallel groups; per
  // (forward, layer, tensor group) an MoE layer's works: before the dispatch, the experts, after
  // the combine, and the experts at the most loaded GPU's load (-1: none slower); per stage the
  // last expert task of that GPU.
  std::map<int, std::vector<int>> expert_groups_, expert_data_groups_;
  std::map<std::tuple<bool, const models::Layer*, int>, std::array<int, 4>> moe_works_;
  std::map<int, int> last_slow_;
  // Per stage and lane, the collectives the passes of the lane's first replica created, in order,
  // and how many of them the replica being emitted has joined; whether any task waits for a later one.
  std::map<std::pair<int, int>, std::vector<int>> group_collectives_;  // by (stage, lane), plan_replicas.cpp
  std::map<std::pair<int, int>, std::size_t> joined_;
  bool reorder_ = false, in_passes_ = false;
};

}  // namespace dtsim::strategies
