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

int Planner::previous_compute(int s) const {
  return static_cast<std::size_t>(s) < prev_compute_.size() ? prev_compute_[static_cast<std::size_t>(s)] : -1;
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
    it->second = table_.get(forward ? forward_work(layers, g_, p_, tpg, cp) : backward_work(layers, g_, p_, tpg, cp, &k_.checkpoints));
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

void Planner::before_layer(Pass& pass, const models::Layer& l, std::vector<int>& deps, const Unit* except) {
  for (std::size_t u = 0; u < units_.size(); ++u)
    if (units_[u].get() != except) attributed(u, [&](Unit& x) { x.before_layer(*this, pass, l, deps); });
}

void Planner::after_layer(Pass& pass, const models::Layer& l, int task, const Unit* except) {
  for (std::size_t u = 0; u < units_.size(); ++u)
    if (units_[u].get() != except) attributed(u, [&](Unit& x) { x.after_layer(*this, pass, l, task); });
}

void Planner::after_backward(Pass& pass, int last, bool split) {
  for (std::size_t u = 0; u < units_.size(); ++u) attributed(u, [&](Unit& x) { x.after_backward(*this, pass, last, split); });
}

bool Planner::ready(int s, const PipeOp& op) const {
  const int j = op.chunk * p_.pipeline + s;
  const auto mb = static_cast<std::size_t>(op.micro_batch);
  if (op.forward) return j == 0 || fwd_out_[static_cast<std::size_t>(j - 1)][mb] >= 0;
  if (op.part == PipeOp::Part::Weight || j == k_.chunks - 1) return true;
  const int u = upstream_grad(j, op);
  return u >= 0 || u == kInPreviousStep;
}

Pass Planner::open_pass(int s, std::size_t index, const PipeOp& op) const {
  Pass pass;
  pass.stage = s;
  pass.chunk = op.chunk * p_.pipeline + s;
  pass.op = &op;
  pass.kind = kind_of(op, !op.forward && last_backward_[static_cast<std::size_t>(s)].at(op.chunk) == index);
  pass.layers = &k_.chunk_layers[static_cast<std::size_t>(pass.chunk)];
  pass.tag = " c" + std::to_string(pass.chunk) + " mb" + std::to_string(op.micro_batch) + (op.previous_step ? " of previous step" : "");
  if (op.forward && pass.chunk > 0)
    pass.cross.push_back(fwd_out_[static_cast<std::size_t>(pass.chunk - 1)][static_cast<std::size_t>(op.micro_batch)]);
  return pass;
}

bool Planner::split(const PassKind& kind) const {
  if (core_splits(kind, k_, p_)) return true;
  for (const auto& u : units_)
    if (u->splits(kind)) return true;
  return false;
}

// The pass, and the memory it allocates or frees by the end of its last task on the stage.
void Planner::emit(int s, std::size_t index, const PipeOp& op) {
  emit_op(s, index, op);
  if (d_ == 0) plan_.memory_marks.push_back({last_compute_[static_cast<std::size_t>(s)], s, activation_change(s, op, chunk_kept(op.chunk, s))});
}

void Planner::emit_op(int s, std::size_t index, const PipeOp& op) {
  Pass pass = open_pass(s, index, op);
  if (op.part == PipeOp::Part::Weight) return emit_weight_pass(pass);
  const int j = pass.chunk;
  for (std::size_t u = 0; u < units_.size(); ++u) attributed(u, [&](Unit& x) { x.before_pass(*this, pass); });  // loads
  bool waits_previous_step = false;  // for a gradient the previous step's window sent
  if (!op.forward && j < k_.chunks - 1) {
    const int u = upstream_grad(j, op);
    if (u >= 0) pass.cross.push_back(u);
    else waits_previous_step = true;
  }
  for (std::size_t u = 0; u < units_.size(); ++u)
    if (units_[u]->takes(pass.kind)) return attributed(u, [&](Unit& x) { x.emit_pass(*this, pass); });
  if (op.forward) return emit_forward(pass);
  emit_backward(pass, waits_previous_step);
}

// One task per layer, each with the units' hooks around it; returns the last (`first`: the first).
int Planner::emit_layers(Pass& pass, int& first) {
  const Layers& layers = *pass.layers;
  const bool forward = pass.kind.forward;
  int last = -1;
  first = -1;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const models::Layer& l = *layers[forward ? i : layers.size() - 1 - i];
    std::vector<int> deps = std::move(pass.cross);
    pass.cross.clear();
    before_layer(pass, l, deps);
    last = layer_task(pass, l, std::move(deps));
    if (first < 0) first = last;
    if (!forward && pass.kind.final) final_backward_[&l] = last;
    after_layer(pass, l, last);
  }
  return last;
}

int Planner::layer_task(Pass& pass, const models::Layer& l, std::vector<int> deps) {
  const bool forward = pass.kind.forward;
  for (std::size_t u = 0; u < units_.size(); ++u)
    if (units_[u]->takes_layers()) {  // expert parallelism's MoE layers
      int task = -1;
      attributed(u, [&](Unit& x) { task = x.emit_layer(*this, pass, l, std::move(deps)); });
      return task;
    }
  return compute(pass.stage, pass_work(forward, pass.chunk, &l, tp_group_[static_cast<std::size_t>(pass.stage)]), std::move(deps),
                 (forward ? "fwd " : "bwd ") + l.name + pass.tag);
}

void Planner::emit_forward(Pass& pass) {
  const int s = pass.stage, j = pass.chunk;
  int last = -1, first = -1;
  if (split(pass.kind)) last = emit_layers(pass, first);
  else last = compute(s, pass_work(true, j, nullptr, tp_group_[static_cast<std::size_t>(s)]), pass.cross, "fwd" + pass.tag);
  if (j < k_.chunks - 1)
    fwd_out_[static_cast<std::size_t>(j)][static_cast<std::size_t>(pass.op->micro_batch)] =
        send(s, stage_of(j + 1), last, pass.layers->back()->output_bytes, "send act" + pass.tag);
}

void Planner::emit_backward(Pass& pass, bool waits_previous_step) {
  const int s = pass.stage, j = pass.chunk;
  const PipeOp& op = *pass.op;
  const bool split_up = split(pass.kind);
  int first = -1, last = -1;
  if (split_up) {
    last = emit_layers(pass, first);
  } else {
    const bool input = op.part == PipeOp::Part::Input;
    const int tpg = tp_group_[static_cast<std::size_t>(s)];
    last = compute(s, input ? part_work(op.part, j, tpg) : pass_work(false, j, nullptr, tpg), pass.cross,
                   (input ? "bwd input" : "bwd") + pass.tag);
    first = last;
    if (pass.kind.final)
      for (const auto* l : *pass.layers) final_backward_[l] = last;
  }
  after_backward(pass, last, split_up);
  if (waits_previous_step) after_previous_.emplace_back(first, j + 1, op.micro_batch);
  if (j > 0)
    grad_out(j, op) =
        send(s, stage_of(j - 1), last, k_.chunk_layers[static_cast<std::size_t>(j - 1)].back()->output_bytes, "send grad" + pass.tag);
  update_after_backward(s, last);
}

// One replica's forward and backward passes of one step.
void Planner::emit_passes() {
  const auto S = static_cast<std::size_t>(p_.pipeline);
  fwd_out_.assign(static_cast<std::size_t>(k_.chunks), std::vector<int>(static_cast<std::size_t>(k_.micro_batches), -1));
  bwd_out_ = fwd_out_;
  bwd_prev_out_ = fwd_out_;
  final_backward_.clear();
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

}  // namespace dtsim::strategies
