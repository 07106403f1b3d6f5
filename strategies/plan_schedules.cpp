// The planner's side of the schedules beyond 1F1B: PipeDream's flush-free window, whose first
// backwards finish the previous step's micro-batches; PipeDream's update after every backward;
// and zero-bubble's backward split into its input-gradient (B) and weight-gradient (W) passes.
#include <algorithm>

#include "strategies/planner.hpp"
#include "strategies/update_kernels.hpp"

namespace dtsim::strategies {

// The transfer of the gradient this backward waits for: -1 while it is not emitted yet,
// kInPreviousStep when the next stage ran that backward in the previous step's window.
int Planner::upstream_grad(int j, const PipeOp& op) const {
  const auto next = static_cast<std::size_t>(j + 1);
  const auto mb = static_cast<std::size_t>(op.micro_batch);
  if (!op.previous_step) return bwd_out_[next][mb];
  const auto& q = seq_[static_cast<std::size_t>(stage_of(j + 1))];
  const int chunk = (j + 1) / p_.pipeline;
  const bool here = std::any_of(q.begin(), q.end(), [&](const PipeOp& o) {
    return !o.forward && o.previous_step && o.micro_batch == op.micro_batch && o.chunk == chunk;
  });
  return here ? bwd_prev_out_[next][mb] : kInPreviousStep;
}

int& Planner::grad_out(int j, const PipeOp& op) {
  auto& table = op.previous_step ? bwd_prev_out_ : bwd_out_;
  return table[static_cast<std::size_t>(j)][static_cast<std::size_t>(op.micro_batch)];
}

int Planner::part_work(PipeOp::Part part, int chunk, int tpg) {
  auto [it, fresh] = part_works_.try_emplace({static_cast<int>(part), chunk, tpg}, -1);
  if (fresh)
    it->second = table_.get(
        backward_part_work(k_.chunk_layers[static_cast<std::size_t>(chunk)], g_, p_, tpg, part == PipeOp::Part::Weight,
                           &k_.checkpoints));
  return it->second;
}

// W: nothing downstream waits for it but the stage's own stream and the gradient
// synchronisation; its B ran earlier on the same stream.
void Planner::emit_weight_pass(Pass& pass) {
  const int s = pass.stage, j = pass.chunk;
  const int last = compute(s, part_work(pass.op->part, j, tp_group_[static_cast<std::size_t>(s)]), {},
                           "bwd weight c" + std::to_string(j) + " mb" + std::to_string(pass.op->micro_batch));
  if (pass.kind.final)
    for (const auto* l : *pass.layers) final_backward_[l] = last;
  after_backward(pass, last, false);  // ZeRO-2 reduces every micro-batch's but the last
}

// PipeDream updates a stage's weights after every backward (each micro-batch is one of its
// minibatches), as its runtime steps the optimizer right after the backward pass; with data
// parallelism the stage's replicas first all-reduce that micro-batch's gradients.
void Planner::update_after_backward(int s, int after) {
  if (!p_.schedule->updates_per_backward) return;
  const auto si = static_cast<std::size_t>(s);
  const Layers& mine = stage_layers(s);
  int ready = after;
  if (grad_ranks() > 1) {
    std::vector<int> deps{after};
    if (last_comm_[si] >= 0) deps.push_back(last_comm_[si]);
    ready = last_comm_[si] = group_collective(s, CollectiveOp::AllReduce, data_groups(s),
                                              layer_params(mine) * grad_bytes_per_param(t_.precision), deps, "pipedream all_reduce");
  }
  taskgraph::Work w;
  w.name = "optimizer";
  w.kernels = update_kernels(p_, t_, layer_params(mine));
  std::vector<int> deps{ready};
  if (last_compute_[si] >= 0) deps.push_back(last_compute_[si]);
  last_compute_[si] = plan_.graph.add_compute(rep(s), table_.get(w), Category::Optimizer, "optimizer", deps);
}

// A backward waiting for a gradient the previous step's window sent waits, when steps repeat, for
// the previous step's copy of this step's transfer of that micro-batch.
void Planner::link_previous_step() {
  for (const auto& [task, chunk, mb] : after_previous_)
    plan_.graph.tasks[static_cast<std::size_t>(task)].after_previous_step.push_back(
        bwd_out_[static_cast<std::size_t>(chunk)][static_cast<std::size_t>(mb)]);
  after_previous_.clear();
}

// A forward keeps its activations until the backward is through. Split, B frees all but what W
// reads: each weight-gradient GEMM's input X and output gradient dY (dW = X^T dY), 32 sbh per
// transformer layer in 16-bit, Qi et al. 2024's M_W against M_B = 34 sbh + 5 a s^2 b; W frees
// the rest.
double Planner::activation_change(int s, const PipeOp& op, double a) const {
  if (op.forward) return a;
  if (op.part == PipeOp::Part::Whole) return -a;
  const Layers& layers = k_.chunk_layers[static_cast<std::size_t>(op.chunk * p_.pipeline + s)];
  const double kept = std::min(weight_pass_bytes(layers, g_.options.activation_bytes), a);  // recomputation rebuilds them within the backward
  return op.part == PipeOp::Part::Input ? -(a - kept) : -kept;
}

// The previous step's micro-batches still in flight when the window opens.
double Planner::live_before_window(int s) const {
  double live = 0;
  for (const auto& op : seq_[static_cast<std::size_t>(s)])
    if (op.previous_step)
      live += chunk_kept(op.chunk, s);
  return live;
}

}  // namespace dtsim::strategies
