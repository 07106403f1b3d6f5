// The step around the passes (plan.cpp): each stage's schedule and groups, every replica's
// passes, then the gradient synchronisation, the tied embedding's sum and the optimizer steps;
// finally the memory, host memory and FLOPs of the plan.
#include <algorithm>
#include <stdexcept>

#include "strategies/plan.hpp"
#include "strategies/planner.hpp"
#include "strategies/settings.hpp"
#include "strategies/stack_memory.hpp"

namespace dtsim::strategies {

// Each stage's schedule, last backward per chunk, tensor and context groups, and blocks.
void Planner::start_stages() {
  const int P = p_.pipeline;
  const auto S = static_cast<std::size_t>(P);
  seq_.resize(S);
  last_backward_.resize(S);
  last_comm_.assign(S, -1);
  for (int s = 0; s < P; ++s) {
    seq_[static_cast<std::size_t>(s)] = stage_schedule(p_.schedule, P, s, static_cast<int>(k_.micro_batches), k_.virtual_stages);
    const auto& q = seq_[static_cast<std::size_t>(s)];
    for (std::size_t i = 0; i < q.size(); ++i)
      if (!q[i].forward) last_backward_[static_cast<std::size_t>(s)][q[i].chunk] = i;
    tp_group_.push_back(plan_.graph.add_group(place_.tensor_group(0, s)));
    ContextGroups cp;
    if (p_.context > 1) {
      cp.all = plan_.graph.add_group(place_.context_group(0, s, 0));
      cp.ring = plan_.graph.add_group({place_.gpu(0, s, 0, p_.context - 1), place_.gpu(0, s, 0, 0)});
    }
    cp_groups_.push_back(cp);
    const Layers& mine = stage_layers(s);
    plan_.stage_layers.push_back(static_cast<int>(
        std::count_if(mine.begin(), mine.end(), [](const models::Layer* l) { return l->kind == models::LayerKind::Block && !l->mtp; })));
  }
}

// Every replica given its own tasks, one after another: its passes (and EASGD's local steps).
void Planner::emit_replicas() {
  const auto S = static_cast<std::size_t>(p_.pipeline);
  const int replicas = k_.replicas, iterations = k_.iterations;
  for (d_ = 0; d_ < replicas; ++d_) {
    last_compute_.assign(S, -1);
    last_send_.assign(S, -1);
    start_replica();
    in_passes_ = true;
    for (int it = 0; it < iterations; ++it) {
      for (std::size_t u = 0; u < units_.size(); ++u) attributed(u, [&](Unit& x) { x.before_passes(*this, it); });
      emit_passes();
    }
    in_passes_ = false;
    replica_final_.push_back(final_backward_);
    replica_last_.push_back(last_compute_);
    // The loads' link to the next step, priority order's first forwards, an asynchronous exchange.
    for (std::size_t u = 0; u < units_.size(); ++u) attributed(u, [&](Unit& x) { x.end_replica(*this); });
    // Every replica emits as many tasks as the first: room for all of them (and as many again
    // for the gradient syncs and updates after) at once. Growing by doubling held the old and the
    // new array together, 1.4 GB at 2.3 million tasks; pages never written cost no memory.
    if (d_ == 0 && replicas > 1) plan_.graph.tasks.reserve(plan_.graph.tasks.size() * static_cast<std::size_t>(replicas + 1));
  }
  d_ = 0;
}

// Tied embeddings on different stages: the first and last stage sum the table's gradients (-1: none).
int Planner::embedding_sync(bool after_flush) {
  const int P = p_.pipeline;
  if (!(P > 1 && g_.tied_params > 0)) return -1;
  std::vector<int> groups;
  for (int d = 0; d < p_.data; ++d)
    for (int c = 0; c < p_.context; ++c)
      for (int t = 0; t < p_.tensor; ++t) groups.push_back(plan_.graph.add_group({place_.gpu(d, 0, t, c), place_.gpu(d, P - 1, t, c)}));
  const double table = g_.tied_params * (after_flush ? pipeline_reduce_bytes() : wire_grad_bytes(p_, t_.precision));
  std::vector<int> deps;
  for (const auto& last : replica_last_) {
    deps.push_back(last[0]);
    deps.push_back(last[static_cast<std::size_t>(P - 1)]);
  }
  return collective(CollectiveOp::AllReduce, groups, table, deps, "embedding all_reduce");
}

Plan Planner::run() {
  const int P = p_.pipeline;
  start_layout();
  start_stages();
  if (!k_.sync && (P > 1 || p_.tensor > 1 || p_.zero_stage > 0))
    throw std::invalid_argument("asynchronous updates are modelled for pure data parallelism only");
  plan_.replicas = k_.replicas;
  plan_.iterations_per_step = k_.iterations;
  emit_replicas();
  if (!k_.sync) return finish();
  if (p_.schedule->updates_per_backward) return finish();  // each backward updated its stage

  // DeepSpeed's pipeline engine reduces the tied weights first, then each stage's gradients
  // (TrainSchedule: ReduceTiedGrads, ReduceGrads); Megatron the other way round.
  const bool after_flush = pipeline_reduce_after_flush();
  if (!after_flush)
    for (int s = 0; s < P; ++s) synchronise_gradients(s);
  int embedding = embedding_sync(after_flush);
  // Without a flush (2BW) the first and last stage end their windows (p - 1) forwards apart: the
  // summed table gradient is applied with the update after, as 2BW's delay of one allows, so
  // neither stage waits for the other.
  if (asynchronous(p_.schedule)) embedding = -1;
  if (after_flush) {
    tied_sync_ = embedding;
    for (int s = 0; s < P; ++s) synchronise_gradients(s);
  }
  for (int s = 0; s < P; ++s) step_optimizer(s, (s == 0 || s == P - 1) ? embedding : -1);
  return finish();
}

// Host memory of one GPU's share, worst stage: ZeRO-Offload's optimizer state and fp32 gradient
// partition; offloaded activations at their peak.
void Planner::host_memory() {
  for (int s = 0; s < p_.pipeline; ++s) {
    // The stage's parameters are only counted where the optimizer is offloaded (the sweep plans
    // thousands of stages that keep it on the GPU).
    const double shard = p_.offload_optimizer ? layer_params(stage_layers(s)) / (p_.zero_stage >= 1 ? grad_ranks() : 1) : 0.0;
    double live = 0, peak = 0;
    for (const auto& op : seq_[static_cast<std::size_t>(s)]) {
      live += (op.forward ? 1 : -1) * chunk_kept(op.chunk, s);
      peak = std::max(peak, live);
    }
    if (const auto known = known_peak(s)) peak = *known;  // no schedule walked (plan_layout.cpp)
    const double opt = p_.offload_optimizer ? shard * optimizer_bytes_per_param(t_.precision, t_.optimizer) : 0.0;
    const double grad = p_.offload_optimizer ? shard * 4.0 : 0.0;
    const double act = p_.activation_offload ? peak : 0.0;
    if (opt + grad + act > plan_.host_bytes()) {
      plan_.host_optimizer_bytes = opt;
      plan_.host_gradient_bytes = grad;
      plan_.host_activation_bytes = act;
    }
  }
}

Plan Planner::finish() {
  const int P = p_.pipeline;
  order_tasks();
  SlackSeen seen;
  for (int s = 0; s < P; ++s) {
    MemoryBreakdown m = stage_memory(s);
    plan_.stage_allocator_slack.push_back(stage_allocator_slack(s, m, seen));
    at_peak(s, m);
    plan_.stage_memory.push_back(m);
    plan_.stage_memory_floor.push_back(std::min(m.peak(), m.peak() - m.activations + live_before_window(s)));
    plan_.stage_weight_versions.push_back(weight_versions(p_.schedule, P, s));
    plan_.stage_staleness.push_back(weight_staleness(p_.schedule, P, s));
    // The worst GPU holds the most, the allocator's cache included where the stack names one.
    const double held = m.peak() + plan_.stage_allocator_slack.back();
    if (s == 0 || held > plan_.memory.peak() + plan_.allocator_slack) {
      plan_.memory = m;
      plan_.allocator_slack = plan_.stage_allocator_slack.back();
      plan_.worst_rank = rep(s);
    }
  }
  if (p_.activation_offload) plan_.stage_memory_floor.clear(), plan_.memory_marks.clear();
  host_memory();
  const double micro_batches = static_cast<double>(k_.micro_batches) * p_.data * plan_.iterations_per_step;
  double recompute = 0;
  // Without recomputation every layer re-runs nothing: the sum stays 0.
  if (p_.recompute != Recompute::None)
    for (const auto& l : g_.layers) recompute += recompute_flops(l, k_.checkpoints.of(l));
  // Each tensor and context rank computes its share of every micro-batch.
  const double shares = static_cast<double>(p_.tensor) * p_.context;
  plan_.model_flops_per_step = g_.model_flops() * shares * micro_batches;
  plan_.hardware_flops_per_step = plan_.model_flops_per_step + recompute * shares * micro_batches;
  plan_.works_built = table_.built();
  for (std::size_t u = 0; u < units_.size(); ++u) plan_.unit_tasks[units_[u]->name()] = unit_tasks_[u];
  return std::move(plan_);
}

Plan plan_training(const models::ModelGraph& g, const ParallelismSpec& p, const TrainingSpec& t, const HostSpec& host) {
  return Planner(g, layout_of(g, p, t), p, t, host).run();
}

Plan plan_training(const models::ModelGraph& g, const Layout& k, const ParallelismSpec& p, const TrainingSpec& t,
                   const HostSpec& host) {
  return Planner(g, k, p, t, host).run();
}

}  // namespace dtsim::strategies
