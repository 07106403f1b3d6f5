#include "strategies/plan.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>

#include "strategies/planner.hpp"
#include "strategies/stack_memory.hpp"

namespace dtsim::strategies {

double layer_params(const Layers& ls) {
  double p = 0;
  for (const auto* l : ls) p += l->params();
  return p;
}

// Keyed by GPU, not by stage: with every replica simulated, each replica's transfers leave from
// its own GPUs (keyed by stage, all of them crossed replica 0's NICs).
int Planner::p2p_group(int from, int to) {
  auto [it, fresh] = p2p_groups_.try_emplace({rep(from), rep(to)}, -1);
  if (fresh) it->second = plan_.graph.add_group({rep(from), rep(to)});
  return it->second;
}

// The tensor group of stage s in the replica being emitted. Works keep replica 0's (tp_group_):
// every replica's group prices them alike, so they stay shared.
int Planner::replica_tp_group(int s) {
  if (d_ == 0) return tp_group_[static_cast<std::size_t>(s)];
  auto [it, fresh] = replica_tp_groups_.try_emplace({d_, s}, -1);
  if (fresh) it->second = plan_.graph.add_group(place_.tensor_group(d_, s));
  return it->second;
}

std::vector<int> Planner::data_groups(int s) {
  auto [it, fresh] = data_groups_.try_emplace(s);
  if (fresh)
    for (int t = 0; t < p_.tensor; ++t) it->second.push_back(plan_.graph.add_group(place_.data_group(s, t)));
  return it->second;
}

int Planner::compute(int s, int work, std::vector<int> deps, const std::string& label) {
  if (last_compute_[static_cast<std::size_t>(s)] >= 0) deps.push_back(last_compute_[static_cast<std::size_t>(s)]);
  if (last_send_[static_cast<std::size_t>(s)] >= 0) deps.push_back(last_send_[static_cast<std::size_t>(s)]);
  int id = plan_.graph.add_compute(rep(s), work, Category::Compute, label, std::move(deps));
  if (prev_compute_.size() <= static_cast<std::size_t>(s)) prev_compute_.resize(static_cast<std::size_t>(s) + 1, -1);
  prev_compute_[static_cast<std::size_t>(s)] = last_compute_[static_cast<std::size_t>(s)];
  last_compute_[static_cast<std::size_t>(s)] = id;
  return id;
}

// A pass's work depends only on its direction, layers and tensor group, never on the
// micro-batch or replica: build it once per distinct pass, not once per (chunk, micro-batch).
// The first build goes through the WorkTable, so ids and names are those of building it every time.
int Planner::pass_work(bool forward, int chunk, const models::Layer* layer, int tpg) {
  auto [it, fresh] = pass_works_.try_emplace({forward, chunk, layer, tpg}, -1);
  if (fresh) {
    const Layers one{layer};
    const Layers& layers = layer ? one : k_.chunk_layers[static_cast<std::size_t>(chunk)];
    const ContextGroups& cp = cp_groups_[static_cast<std::size_t>(stage_of(chunk))];
    it->second = table_.get(forward ? forward_work(layers, g_, p_, tpg, cp) : backward_work(layers, g_, p_, tpg, cp));
  }
  return it->second;
}

// One rank's share of the activation crosses between stages; without sequence parallelism the
// receiving tensor group all-gathers it back (Megatron's scatter/gather, SC21 Sec. 4.1).
// `tensor_bytes` is the whole tensor crossing the boundary (the output of the last layer before it).
int Planner::send(int from, int to, int after, double tensor_bytes, const std::string& label) {
  const double bytes = tensor_bytes / p_.tensor;
  int id = collective(CollectiveOp::SendRecv, {p2p_group(from, to)}, bytes, {after}, label);
  if (p_.blocking_p2p) last_send_[static_cast<std::size_t>(from)] = id;
  if (p_.tensor > 1 && !p_.sequence_parallel)
    id = collective(CollectiveOp::AllGather, {replica_tp_group(to)}, bytes * p_.tensor, {id},
                    "gather " + label);
  return id;
}

int Planner::collective(CollectiveOp op, std::vector<int> groups, double bytes, std::vector<int> deps, const std::string& label) {
  return plan_.graph.add_collective({op, p_.algorithm, std::move(groups), bytes}, label, std::move(deps));
}

void Planner::zero2_reduce(int s, const Layers& layers, int after, double gbytes, const std::string& tag) {
  if (grad_ranks() <= 1) return;
  std::vector<int> deps{after};
  auto& comm = last_comm_[static_cast<std::size_t>(s)];
  if (comm >= 0) deps.push_back(comm);
  comm = group_collective(s, CollectiveOp::ReduceScatter, data_groups(s), layer_params(layers) * gbytes, deps, "zero2 reduce" + tag);
}

bool Planner::ready(int s, const PipeOp& op) const {
  const int j = op.chunk * p_.pipeline + s;
  const auto mb = static_cast<std::size_t>(op.micro_batch);
  if (op.forward) return j == 0 || fwd_out_[static_cast<std::size_t>(j - 1)][mb] >= 0;
  if (op.part == PipeOp::Part::Weight || j == k_.chunks - 1) return true;
  const int u = upstream_grad(j, op);
  return u >= 0 || u == kInPreviousStep;
}

void Planner::emit(int s, std::size_t index, const PipeOp& op) {
  const int j = op.chunk * p_.pipeline + s;
  const auto mb = static_cast<std::size_t>(op.micro_batch);
  const Layers& layers = k_.chunk_layers[static_cast<std::size_t>(j)];
  const int tpg = tp_group_[static_cast<std::size_t>(s)];
  const std::string tag = " c" + std::to_string(j) + " mb" + std::to_string(op.micro_batch) + (op.previous_step ? " of previous step" : "");
  if (op.part == PipeOp::Part::Weight) return emit_weight_pass(s, index, op);
  const bool zero3 = p_.zero_stage == 3 && grad_ranks() > 1;
  const double wbytes = weight_bytes_per_param(t_.precision), gbytes = grad_bytes_per_param(t_.precision);
  std::vector<int> cross;
  if (op.forward && j > 0) cross.push_back(fwd_out_[static_cast<std::size_t>(j - 1)][mb]);
  if (op.forward && j == 0 && p_.input.enabled) {  // the loader stream hands over this micro-batch
    // Every micro-batch is loaded, the first of a step too. The loader runs ahead of the GPU without
    // bound, one load after the other: a step's first starts when the previous step's last ends.
    if (load_work_ < 0) {
      taskgraph::Work w;
      w.name = "load micro-batch";
      w.fixed_seconds = p_.input.seconds(p_.micro_batch);
      load_work_ = table_.get(std::move(w));
    }
    std::vector<int> deps;
    if (last_load_ >= 0) deps.push_back(last_load_);
    const int load = plan_.graph.add_compute(rep(s), load_work_, Category::Input, "load" + tag, deps);
    plan_.graph.tasks[static_cast<std::size_t>(load)].off_step_order = true;  // it waits for loads alone
    if (last_load_ < 0) first_load_ = load;
    last_load_ = load;
    cross.push_back(last_load_);
  }
  bool waits_previous_step = false;  // for a gradient the previous step's window sent
  if (!op.forward && j < k_.chunks - 1) {
    const int u = upstream_grad(j, op);
    if (u >= 0) cross.push_back(u);
    else waits_previous_step = true;
  }

  if (framework_zero3()) return emit_sharded(s, j, op, std::move(cross), tag);
  // ZeRO-3 gathers a layer's parameters on the communication stream before the layer runs; under
  // expert parallelism its experts' come from the expert-data-parallel group (plan_experts.cpp).
  auto gather = [&](const models::Layer* l) {
    const double experts = p_.expert > 1 ? l->expert_params() : 0.0;
    return dense_and_expert_collective(s, CollectiveOp::AllGather, l->params() - experts, experts, wbytes, -1,
                                       "zero3 gather " + l->name + tag, "zero3 gather experts of " + l->name + tag);
  };
  int last = -1;
  if (op.forward) {
    if (zero3) {
      for (const auto* l : layers) {
        int ag = gather(l);
        std::vector<int> deps = cross;
        deps.push_back(ag);
        last = p_.expert > 1 ? layer_pass(s, j, true, l, deps, tag) : compute(s, pass_work(true, j, l, tpg), deps, "fwd " + l->name + tag);
        if (p_.activation_offload) offload_layer(s, j, op, l, last);
        cross.clear();
      }
    } else if ((p_.priority_buckets && op.micro_batch == 0) || p_.activation_offload) {
      // Each layer waits for its own update (priority order), or hands its activations to the host.
      for (const auto* l : layers) {
        last = compute(s, pass_work(true, j, l, tpg), cross, "fwd " + l->name + tag);
        if (p_.priority_buckets) first_forward_[l] = last;
        if (p_.activation_offload) offload_layer(s, j, op, l, last);
        cross.clear();
      }
    } else if (p_.expert > 1) {  // MoE layers stop at their all-to-alls
      for (const auto* l : layers) {
        last = layer_pass(s, j, true, l, cross, tag);
        cross.clear();
      }
    } else {
      last = compute(s, pass_work(true, j, nullptr, tpg), cross, "fwd" + tag);
    }
    if (j < k_.chunks - 1)
      fwd_out_[static_cast<std::size_t>(j)][mb] = send(s, stage_of(j + 1), last, layers.back()->output_bytes, "send act" + tag);
    return;
  }
  const bool final = last_backward_[static_cast<std::size_t>(s)].at(op.chunk) == index;
  // ZeRO-Offload copies each gradient bucket to the host as soon as backward produced it.
  // Activation offload fetches each layer's activations back before its backward.
  const bool split = zero3 || p_.expert > 1 || (final && grad_ranks() > 1 && p_.overlap_grad_reduce) || (final && p_.offload_optimizer) ||
                     p_.activation_offload;
  int first = -1;
  if (split) {
    for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
      if (p_.activation_offload) fetch_layer(s, j, op, *it, cross);
      std::vector<int> deps = cross;
      if (zero3) deps.push_back(gather(*it));
      last = p_.expert > 1 ? layer_pass(s, j, false, *it, deps, tag)
                           : compute(s, pass_work(false, j, *it, tpg), deps, "bwd " + (*it)->name + tag);
      if (first < 0) first = last;
      cross.clear();
      if (final) final_backward_[*it] = last;
      if (zero3) {  // reduce-scatter this layer's gradients right away
        const double experts = p_.expert > 1 ? (*it)->expert_params() : 0.0;
        dense_and_expert_collective(s, CollectiveOp::ReduceScatter, (*it)->params() - experts, experts, gbytes, last,
                                    "zero3 reduce " + (*it)->name + tag, "zero3 reduce experts of " + (*it)->name + tag);
      }
    }
    if (p_.zero_stage == 2 && p_.expert > 1 && !final) {
      // As below: ZeRO-2 keeps only its shard of the gradients, so every micro-batch reduces them.
      double experts = 0;
      for (const auto* l : layers) experts += l->expert_params();
      dense_and_expert_collective(s, CollectiveOp::ReduceScatter, layer_params(layers) - experts, experts, gbytes, last,
                                  "zero2 reduce" + tag, "zero2 reduce experts" + tag);
    } else if (p_.zero_stage == 2 && !final) {
      zero2_reduce(s, layers, last, gbytes, tag);  // split per layer only for activation offload
    }
  } else {
    const bool input = op.part == PipeOp::Part::Input;
    last = compute(s, input ? part_work(op.part, j, tpg) : pass_work(false, j, nullptr, tpg), cross,
                   (input ? "bwd input" : "bwd") + tag);
    first = last;
    if (final)
      for (const auto* l : layers) final_backward_[l] = last;
    if (p_.zero_stage == 2 && !final && !input) zero2_reduce(s, layers, last, gbytes, tag);
  }
  if (waits_previous_step) after_previous_.emplace_back(first, j + 1, op.micro_batch);
  if (j > 0)
    grad_out(j, op) =
        send(s, stage_of(j - 1), last, k_.chunk_layers[static_cast<std::size_t>(j - 1)].back()->output_bytes, "send grad" + tag);
  update_after_backward(s, last);
}

// One replica's forward and backward passes of one step.
void Planner::emit_passes() {
  const auto S = static_cast<std::size_t>(p_.pipeline);
  fwd_out_.assign(static_cast<std::size_t>(k_.chunks), std::vector<int>(static_cast<std::size_t>(k_.micro_batches), -1));
  bwd_out_ = fwd_out_;
  bwd_prev_out_ = fwd_out_;
  final_backward_.clear();
  first_forward_.clear();
  // Emit passes in an order every dependency respects: each stage runs its schedule as far as
  // the passes it waits for exist.
  std::vector<std::size_t> next(S, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < p_.pipeline; ++s) {
      auto& i = next[static_cast<std::size_t>(s)];
      const auto& q = seq_[static_cast<std::size_t>(s)];
      while (i < q.size() && ready(s, q[i])) {
        emit(s, i, q[i]);
        ++i;
        progress = true;
      }
    }
  }
  for (int s = 0; s < p_.pipeline; ++s)
    if (next[static_cast<std::size_t>(s)] != seq_[static_cast<std::size_t>(s)].size())
      throw std::logic_error("pipeline schedule cannot make progress");
  link_previous_step();
}

Plan Planner::run() {
  const int P = p_.pipeline;
  start_layout();

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
    const Layers mine = stage_layers(s);
    plan_.stage_layers.push_back(static_cast<int>(
        std::count_if(mine.begin(), mine.end(), [](const models::Layer* l) { return l->kind == models::LayerKind::Block; })));
  }
  const bool sync = k_.sync;
  if (!sync && (P > 1 || p_.tensor > 1 || p_.zero_stage > 0))
    throw std::invalid_argument("asynchronous updates are modelled for pure data parallelism only");
  const int replicas = k_.replicas, iterations = k_.iterations;
  plan_.replicas = replicas;
  plan_.iterations_per_step = iterations;
  int previous_exchange = -1;  // EASGD's workers take turns with the centre
  for (d_ = 0; d_ < replicas; ++d_) {
    last_compute_.assign(S, -1);
    last_send_.assign(S, -1);
    last_load_ = first_load_ = -1;
    start_replica();
    in_passes_ = true;
    for (int it = 0; it < iterations; ++it) {
      if (it > 0) local_optimizer();
      emit_passes();
    }
    in_passes_ = false;
    if (first_load_ >= 0)  // the next step's first load follows this step's last
      plan_.graph.tasks[static_cast<std::size_t>(first_load_)].after_previous_step.push_back(last_load_);
    replica_final_.push_back(final_backward_);
    replica_first_forward_.push_back(first_forward_);
    replica_last_.push_back(last_compute_);
    if (!sync) asynchronous_update(previous_exchange);
    // Every replica emits as many tasks as the first: room for all of them (and as many again
    // for the gradient syncs and updates after) at once. Growing by doubling held the old and the
    // new array together, 1.4 GB at 2.3 million tasks; pages never written cost no memory.
    if (d_ == 0 && replicas > 1) plan_.graph.tasks.reserve(plan_.graph.tasks.size() * static_cast<std::size_t>(replicas + 1));
  }
  d_ = 0;
  if (!sync) return finish();
  if (p_.schedule == Schedule::PipeDream) return finish();  // each backward updated its stage

  // DeepSpeed's pipeline engine reduces the tied weights first, then each stage's gradients
  // (TrainSchedule: ReduceTiedGrads, ReduceGrads); Megatron the other way round.
  const bool after_flush = pipeline_reduce_after_flush();
  if (!after_flush)
    for (int s = 0; s < P; ++s) synchronise_gradients(s);
  // Tied embeddings on different stages: the first and last stage sum the table's gradients.
  int embedding_sync = -1;
  if (P > 1 && g_.tied_params > 0) {
    std::vector<int> groups;
    for (int d = 0; d < p_.data; ++d)
      for (int c = 0; c < p_.context; ++c)
        for (int t = 0; t < p_.tensor; ++t)
          groups.push_back(plan_.graph.add_group({place_.gpu(d, 0, t, c), place_.gpu(d, P - 1, t, c)}));
    const double table = g_.tied_params * (after_flush ? pipeline_reduce_bytes() : grad_bytes_per_param(t_.precision));
    std::vector<int> deps;
    for (const auto& last : replica_last_) {
      deps.push_back(last[0]);
      deps.push_back(last[S - 1]);
    }
    embedding_sync = collective(CollectiveOp::AllReduce, groups, table, deps, "embedding all_reduce");
  }
  // Without a flush (2BW) the first and last stage end their windows (p - 1) forwards apart: the
  // summed table gradient is applied with the update after, as 2BW's delay of one allows, so
  // neither stage waits for the other.
  if (asynchronous(p_.schedule)) embedding_sync = -1;
  if (after_flush) {
    tied_sync_ = embedding_sync;
    for (int s = 0; s < P; ++s) synchronise_gradients(s);
  }
  for (int s = 0; s < P; ++s) step_optimizer(s, (s == 0 || s == P - 1) ? embedding_sync : -1);
  return finish();
}

Plan Planner::finish() {
  const int P = p_.pipeline;
  order_tasks();
  for (int s = 0; s < P; ++s) {
    plan_.stage_memory.push_back(stage_memory(s));
    plan_.stage_weight_versions.push_back(weight_versions(p_.schedule, P, s));
    plan_.stage_staleness.push_back(weight_staleness(p_.schedule, P, s));
    // The worst GPU holds the most, the allocator's cache included where the stack names one.
    auto held = [&](const MemoryBreakdown& m) { return m.peak() + allocator_slack(t_.memory.allocator, m.activations + m.other); };
    if (s == 0 || held(plan_.stage_memory.back()) > held(plan_.memory)) {
      plan_.memory = plan_.stage_memory.back();
      plan_.worst_rank = rep(s);
    }
  }
  // Host memory of one GPU's share, worst stage: ZeRO-Offload's optimizer state and fp32 gradient
  // partition; offloaded activations at their peak.
  for (int s = 0; s < P; ++s) {
    const double shard = layer_params(stage_layers(s)) / (p_.zero_stage >= 1 ? grad_ranks() : 1);
    double live = 0, peak = 0;
    for (const auto& op : seq_[static_cast<std::size_t>(s)]) {
      live += (op.forward ? 1 : -1) * chunk_kept(op.chunk, s);
      peak = std::max(peak, live);
    }
    const double opt = p_.offload_optimizer ? shard * optimizer_bytes_per_param(t_.precision, t_.optimizer) : 0.0;
    const double grad = p_.offload_optimizer ? shard * 4.0 : 0.0;
    const double act = p_.activation_offload ? peak : 0.0;
    if (opt + grad + act > plan_.host_bytes()) {
      plan_.host_optimizer_bytes = opt;
      plan_.host_gradient_bytes = grad;
      plan_.host_activation_bytes = act;
    }
  }
  const double micro_batches = static_cast<double>(k_.micro_batches) * p_.data * plan_.iterations_per_step;
  double recompute = 0;
  for (const auto& l : g_.layers) recompute += recompute_flops(l, p_.recompute);
  // Each tensor and context rank computes its share of every micro-batch.
  const double shares = static_cast<double>(p_.tensor) * p_.context;
  plan_.model_flops_per_step = g_.model_flops() * shares * micro_batches;
  plan_.hardware_flops_per_step = plan_.model_flops_per_step + recompute * shares * micro_batches;
  plan_.works_built = table_.built();
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
