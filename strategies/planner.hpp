#pragma once
// The planner that turns a model and a strategy into a task graph: the emitter, which keeps the
// streams, groups, sends and the replica join, and calls the mechanism units (strategies/unit.hpp,
// strategies/units/) around each pass, layer and optimizer step. Its files: plan.cpp (the passes),
// plan_step.cpp (replicas, the step around the passes, finish), plan_layout.cpp (the layout
// without the graph), plan_memory.cpp (memory per stage), plan_updates.cpp (gradient
// synchronisation and optimizer steps), plan_offload.cpp (PCIe copies, ZeRO-Offload's host step),
// plan_replicas.cpp (the replica join), plan_schedules.cpp and plan_experts.cpp.
#include <cstdint>
#include <array>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "strategies/layout.hpp"
#include "strategies/placement.hpp"
#include "strategies/plan.hpp"
#include "strategies/schedule.hpp"
#include "strategies/unit.hpp"
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
      : g_(g), k_(std::move(k)), p_(p), t_(t), host_(host), place_(k_.place), table_(plan_.graph), units_(make_units(p)) {}

  Plan run();
  // run() without the task graph: micro-batches, chunks, memory and FLOPs (plan_layout.cpp).
  PlanLayout layout();

  // --- what the mechanism units (strategies/unit.hpp) read and emit with
  const Layout& shape() const { return k_; }
  const ParallelismSpec& spec() const { return p_; }
  const TrainingSpec& training() const { return t_; }
  const models::ModelGraph& model() const { return g_; }
  const HostSpec& host() const { return host_; }
  const std::vector<PipeOp>& stage_ops(int s) const { return seq_[static_cast<std::size_t>(s)]; }  // its schedule's passes
  Plan& plan() { return plan_; }
  WorkTable& works() { return table_; }
  int replica() const { return d_; }  // the replica being emitted
  void set_replica(int d) { d_ = d; }
  int gpu(int s) const { return rep(s); }  // stage s's GPU of the replica being emitted
  // Each replica's last task per stage, once its passes are emitted (then its optimizer step's).
  std::vector<std::vector<int>>& replica_last() { return replica_last_; }
  int tensor_group(int s) const { return tp_group_[static_cast<std::size_t>(s)]; }
  const ContextGroups& context_groups(int s) const { return cp_groups_[static_cast<std::size_t>(s)]; }
  // Stage s's streams of the replica being emitted: its last compute task (and the one before),
  // its last data-parallel collective.
  int& compute_stream(int s) { return last_compute_[static_cast<std::size_t>(s)]; }
  int previous_compute(int s) const;
  int& comm_stream(int s) { return last_comm_[static_cast<std::size_t>(s)]; }
  std::vector<int> data_groups(int s);
  // Per stage: the expert-parallel (all-to-all) groups and the expert-data-parallel groups.
  std::vector<int> expert_groups(int s);
  std::vector<int> expert_data_groups(int s);
  // ZeRO-3's groups (strategies/plan_hybrid.cpp): the data-parallel groups, or under HSDP every
  // shard group of the stage; and HSDP's replicate groups.
  std::vector<int> shard_groups(int s);
  std::vector<int> replicate_groups(int s);
  // ZeRO-3's collective over a layer's parameters on stage s's communication stream after
  // `after`: a gather over the shard groups, or a reduce-scatter there followed under HSDP by the
  // all-reduce of the shard across the replicate groups (none of either over one rank). Returns
  // the last it emitted, -1 for none.
  int zero3_collective(int s, CollectiveOp op, double params, double bytes_per_param, int after, const std::string& label);
  // Each layer's final backward task in a replica's passes.
  const std::map<const models::Layer*, int>& finals(std::size_t replica) const { return replica_final_[replica]; }
  // A pass's work (one layer, or the whole chunk for null), shared by every pass alike.
  int pass_work(bool forward, int chunk, const models::Layer* layer, int tpg);
  int compute(int s, int work, std::vector<int> deps, const std::string& label);
  int collective(CollectiveOp op, std::vector<int> groups, double bytes, std::vector<int> deps, const std::string& label);
  // Every replica emitted under ZeRO-2/3 (plan_replicas.cpp): a collective over the data-parallel
  // groups in the passes is one task every replica joins.
  bool replicas_join() const { return replicas_join_; }
  int group_collective(int s, taskgraph::Collective c, std::vector<int> deps, const std::string& label, int lane = 0);
  int group_collective(int s, CollectiveOp op, std::vector<int> groups, double bytes, std::vector<int> deps, const std::string& label) {
    return group_collective(s, {op, p_.algorithm, std::move(groups), bytes}, std::move(deps), label);
  }
  int dense_and_expert_collective(int s, CollectiveOp op, double dense, double experts, double bytes_per_param, int after,
                                  const std::string& dense_label, const std::string& expert_label);
  int pcie_copy(int s, double bytes, std::vector<int> deps, bool to_host, const std::string& label);
  // Tasks the units ask the optimizer step of the replica being emitted to wait for.
  void unit_step_waits(std::vector<int>& deps) const;
  // Every unit's hooks but `except`'s around one layer (a unit that emits whole passes calls them).
  void before_layer(Pass& pass, const models::Layer& l, std::vector<int>& deps, const Unit* except = nullptr);
  void after_layer(Pass& pass, const models::Layer& l, int task, const Unit* except = nullptr);
  // One layer's task of a split pass, or the layer-taking unit's tasks (expert parallelism's MoE
  // layers); a unit that emits whole passes hands it the layers it does not run itself.
  int layer_task(Pass& pass, const models::Layer& l, std::vector<int> deps);

 private:
  void start_layout();
  int rep(int s) const { return place_.gpu(d_, s, 0); }
  // Ranks that hold the same parameters and sum their gradients: data x context.
  int grad_ranks() const { return k_.grad_ranks; }
  int shard_ranks() const { return k_.shard_ranks; }  // ZeRO's shard: grad_ranks, or HSDP's group
  int stage_of(int chunk) const { return k_.stage_of(chunk); }
  const Layers& stage_layers(int s) const { return stage_layers_.at(static_cast<std::size_t>(s)); }
  int p2p_group(int from, int to);
  int replica_tp_group(int s);
  int send(int from, int to, int after, double tensor_bytes, const std::string& label);
  void start_replica();
  int lane_creator(int lane) const;
  void order_tasks();
  // Runs `f` on units_[unit], counting the tasks it creates as that unit's (Plan::unit_tasks); a
  // hook of another unit inside it counts its own.
  template <class F>
  void attributed(std::size_t unit, F&& f);
  // The passes (plan.cpp): each pass opened with what it waits for, split per layer where a unit
  // or the gradient synchronisation asks.
  bool ready(int s, const PipeOp& op) const;
  void emit(int s, std::size_t index, const PipeOp& op);
  void emit_op(int s, std::size_t index, const PipeOp& op);
  Pass open_pass(int s, std::size_t index, const PipeOp& op) const;
  bool split(const PassKind& kind) const;
  int emit_layers(Pass& pass, int& first);
  void emit_forward(Pass& pass);
  void emit_backward(Pass& pass, bool waits_previous_step);
  void after_backward(Pass& pass, int last, bool split);
  void synchronise_gradients(int s);
  void synchronise_bucket(int s, const Layers& mine, const Bucket& bucket, std::size_t b);
  void step_optimizer(int s, int embedding_sync);
  void step_optimizer_one(int s, int embedding_sync);
  void emit_passes();
  void start_stages();
  void emit_replicas();
  int embedding_sync(bool after_flush);
  Plan finish();
  void host_memory();
  MemoryBreakdown stage_memory(int s) const;
  double largest_rebuild(int s) const;
  // Stage s's peak m at the moment it happens: the loss's tensors as the stack keeps them, the
  // gradients not yet allocated there (plan_memory.cpp).
  void at_peak(int s, MemoryBreakdown& m) const;
  // The allocator's cache beyond stage s's peak m (stack_memory.hpp, allocator_slack); `seen`
  // holds the stages replayed so far by their trace_signature().
  using SlackSeen = std::vector<std::pair<std::vector<double>, double>>;
  double stage_allocator_slack(int s, const MemoryBreakdown& m, SlackSeen& seen) const;
  bool pipeline_reduce_after_flush() const;
  double pipeline_reduce_bytes() const;
  // Schedules beyond 1F1B (plan_schedules.cpp).
  int upstream_grad(int j, const PipeOp& op) const;
  int& grad_out(int j, const PipeOp& op);
  int part_work(PipeOp::Part part, int chunk, int tpg);
  void emit_weight_pass(Pass& pass);
  void update_after_backward(int s, int after);
  void link_previous_step();
  double activation_change(int s, const PipeOp& op, double a) const;
  double live_before_window(int s) const;
  // Expert parallelism's shares of the optimizer's parameters and of memory, and the GPU of
  // expert coordinates (expert tensor, expert and expert-data rank) on stage s (plan_experts.cpp).
  double update_shard(const Layers& ls) const;
  int expert_gpu(int s, int et, int ep, int edp) const;
  // The model states of layers `ls` and of `copies` more dense parameters (a shared table's copy).
  MemoryBreakdown state_memory(const Layers& ls, double copies = 0) const;
  // A shared embedding table's copy on stage s (a tied output layer or multi-token prediction's
  // lookups away from the embedding's stage): its parameters; 0 where it has none.
  double shared_table_copy(int s) const;

  const models::ModelGraph& g_;
  const Layout k_;
  // Each stage's layers, made once: planning asks for a stage's several times.
  const std::vector<Layers> stage_layers_ = [this] {
    std::vector<Layers> out;
    for (int s = 0; s < k_.pipeline; ++s) out.push_back(k_.stage_layers(s));
    return out;
  }();
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
  // layout() only: each stage's peak of live activations where its schedule has a closed form
  // (peak_in_flight); that stage's seq_ is then left empty, nothing walking it.
  std::vector<std::optional<double>> known_peak_;
  std::optional<double> known_peak(int s) const {
    return static_cast<std::size_t>(s) < known_peak_.size() ? known_peak_[static_cast<std::size_t>(s)] : std::nullopt;
  }
  std::vector<std::map<int, std::size_t>> last_backward_;  // per stage: chunk -> index of its final backward
  std::vector<int> tp_group_, last_compute_, last_comm_, last_send_;
  std::vector<ContextGroups> cp_groups_;  // per stage
  std::vector<std::vector<int>> fwd_out_, bwd_out_;  // per model chunk, per micro-batch: task handing on
  std::map<const models::Layer*, int> final_backward_;
  int d_ = 0;  // the replica being emitted
  std::vector<std::map<const models::Layer*, int>> replica_final_;
  std::vector<std::vector<int>> replica_last_;
  std::map<std::pair<int, int>, int> p2p_groups_;  // by (GPU from, GPU to)
  std::map<std::pair<int, int>, int> replica_tp_groups_;  // by (replica, stage), replicas after 0
  std::map<int, std::vector<int>> data_groups_;
  // (forward, chunk, one layer or null for the whole chunk, tensor group) -> its shared work.
  std::map<std::tuple<bool, int, const models::Layer*, int>, int> pass_works_;
  // Offload's PCIe copy streams per (replica, stage) (host to device, device to host: each GPU
  // has its own copy engines) and each pass's offloaded copy.
  std::map<std::pair<int, int>, std::array<int, 2>> copy_streams_;
  std::map<std::pair<int, int>, int> copy_groups_;  // (replica, stage) -> the GPUs copying together
  std::map<int, int> copy_together_groups_;        // stage -> every replica's GPUs
  std::vector<int> prev_compute_;                // per stage: the compute task before the last one
  int tied_sync_ = -1;  // DeepSpeed's pipeline: the tied weights' reduction the stages' reductions follow
  // Asynchronous schedules: per chunk, per micro-batch, the transfer of the gradient of the
  // previous step's micro-batch; and the backwards waiting for one of the previous step's
  // (task, chunk whose transfer it waits for, micro-batch).
  std::vector<std::vector<int>> bwd_prev_out_;
  std::vector<std::tuple<int, int, int>> after_previous_;
  std::map<std::tuple<int, int, int>, int> part_works_;  // (part, chunk, tensor group) -> work
  // Expert parallelism: per stage, the all-to-all groups and the expert-data-parallel groups.
  std::map<int, std::vector<int>> expert_groups_, expert_data_groups_;
  std::map<int, std::vector<int>> shard_groups_, replicate_groups_;  // HSDP, per stage
  // Per stage and lane, the collectives the passes of the lane's first replica created, in order,
  // and how many of them the replica being emitted has joined; whether any task waits for a later one.
  std::map<std::pair<int, int>, std::vector<int>> group_collectives_;  // by (stage, lane), plan_replicas.cpp
  std::map<std::pair<int, int>, std::size_t> joined_;
  bool reorder_ = false, in_passes_ = false;
  const bool replicas_join_ = strategies::replicas_join(k_, p_);
  // The mechanism units this strategy uses (strategies/unit.hpp), in the order their hooks run,
  // and the tasks attributed to units so far (attributed()).
  std::vector<std::unique_ptr<Unit>> units_;
  std::vector<std::size_t> unit_tasks_ = std::vector<std::size_t>(units_.size(), 0);
  std::size_t attributed_ = 0;
};

template <class F>
void Planner::attributed(std::size_t unit, F&& f) {
  const std::size_t before = plan_.graph.tasks.size(), inner = attributed_;
  f(*units_[unit]);
  const std::size_t own = plan_.graph.tasks.size() - before - (attributed_ - inner);
  unit_tasks_[unit] += own;
  attributed_ += own;
}

}  // namespace dtsim::strategies
