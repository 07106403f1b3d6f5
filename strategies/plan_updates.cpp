#include "strategies/planner.hpp"
#include "strategies/settings.hpp"

namespace dtsim::strategies {

bool Planner::pipeline_reduce_after_flush() const { return strategies::pipeline_reduce_after_flush(p_); }

double Planner::pipeline_reduce_bytes() const { return reduced_grad_bytes(p_, t_.precision); }

void Planner::synchronise_gradients(int s) {
  if (grad_ranks() <= 1 || p_.zero_stage == 3) return;
  const Layers mine = stage_layers(s);
  const bool after_flush = pipeline_reduce_after_flush();
  const double gbytes = reduced_grad_bytes(p_, t_.precision);
  // After the flush, in buffers of a fixed element count (buffered_allreduce_fallback).
  const double cap = after_flush ? p_.framework.pipeline_reduce_bucket_params * gbytes : p_.bucket_bytes;
  auto buckets = make_buckets(mine, gbytes, cap, after_flush ? cap : p_.first_bucket_bytes,
                              p_.expert > 1 ? BucketParams::Dense : BucketParams::All);
  if (s == 0) plan_.gradient_buckets = buckets.size();
  CollectiveOp op = p_.zero_stage == 0 ? CollectiveOp::AllReduce : CollectiveOp::ReduceScatter;
  // Bytes on the wire per gradient byte, and encode/decode passes over the bucket in HBM.
  double wire = 1.0, passes = 0.0;
  switch (p_.compression) {
    case Compression::None: break;
    case Compression::Fp16: wire = 2.0 / gbytes; passes = wire < 1.0 ? 2.0 : 0.0; break;
    case Compression::Int8: wire = 1.0 / gbytes; passes = 3.0; break;
    case Compression::TopK:  // each rank's kept values and indices are gathered by all
      wire = p_.topk_ratio * (gbytes + 4.0) / gbytes * grad_ranks();
      passes = 4.0;  // selection reads the bucket several times; decoding scatter-adds
      op = CollectiveOp::AllGather;
      break;
  }
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    std::vector<int> deps;
    for (std::size_t d = 0; d < replica_final_.size(); ++d) {
      if (p_.overlap_grad_reduce && !after_flush)
        deps.push_back(replica_final_[d].at(mine[static_cast<std::size_t>(buckets[b].ready_after_layer)]));
      else deps.push_back(replica_last_[d][static_cast<std::size_t>(s)]);
    }
    if (after_flush && tied_sync_ >= 0 && (s == 0 || s == p_.pipeline - 1)) deps.push_back(tied_sync_);
    // Buckets queue in the order they fill; in priority order they share a stream instead.
    const int previous = p_.priority_buckets ? -1 : last_comm_[static_cast<std::size_t>(s)];
    if (previous >= 0) deps.push_back(previous);
    if (passes > 0) {  // compression kernels share the GPU with backward
      taskgraph::Work w;
      w.name = "compress";
      w.kernels = {models::Kernel{"compress", models::KernelKind::Memory, 1, 0, 0, 0, 4.0 * buckets[b].bytes / gbytes,
                                  passes * buckets[b].bytes}};
      const int work = table_.get(w);
      std::vector<int> compressed;
      for (std::size_t d = 0; d < replica_final_.size(); ++d) {
        d_ = static_cast<int>(d);
        compressed.push_back(plan_.graph.add_compute(rep(s), work, Category::Communication, "compress bucket " + std::to_string(b), deps));
      }
      deps = compressed;
    }
    std::vector<int> ready;  // the replicas' gradients; with backup workers only some are awaited
    if (p_.backup_workers > 0) std::swap(ready, deps);
    if (previous >= 0 && p_.backup_workers > 0) deps.push_back(previous);
    const int id = collective(op, data_groups(s), buckets[b].bytes * wire, deps,
                              std::string(taskgraph::to_string(op)) + " bucket " + std::to_string(b));
    if (p_.backup_workers > 0) {
      auto& task = plan_.graph.tasks[static_cast<std::size_t>(id)];
      task.any_deps = std::move(ready);
      task.quorum = static_cast<int>(task.any_deps.size()) - p_.backup_workers;
    }
    last_comm_[static_cast<std::size_t>(s)] = id;
    if (p_.priority_buckets) {
      auto& task = plan_.graph.tasks[static_cast<std::size_t>(id)];
      task.stream = s;
      task.priority = buckets[b].ready_after_layer;  // the earliest layer the next forward needs
      bucket_comm_.push_back(id);
    }
  }
  if (p_.priority_buckets) buckets_ = buckets;
  if (p_.expert > 1) synchronise_expert_gradients(s);
}

// Priority buckets: one update per bucket, as soon as its gradients are reduced; the next step's
// forward of a layer waits for the updates of the buckets holding it.
void Planner::step_optimizer_per_bucket(int s) {
  const Layers mine = stage_layers(s);
  const double gbytes = grad_bytes_per_param(t_.precision);
  for (std::size_t d = 0; d < replica_last_.size(); ++d) {
    d_ = static_cast<int>(d);
    std::vector<int> updates;
    for (std::size_t b = 0; b < buckets_.size(); ++b) {
      taskgraph::Work w;
      w.name = "optimizer";
      w.kernels = {models::optimizer_kernel(t_.optimizer, buckets_[b].bytes / gbytes, update_path(t_.precision))};
      std::vector<int> deps{bucket_comm_[b], replica_last_[d][static_cast<std::size_t>(s)]};
      updates.push_back(plan_.graph.add_compute(rep(s), table_.get(w), Category::Optimizer, "optimizer bucket " + std::to_string(b), deps));
      plan_.graph.tasks[static_cast<std::size_t>(updates.back())].off_step_order = true;
    }
    for (std::size_t b = 0; b < buckets_.size(); ++b)
      for (int li = buckets_[b].ready_after_layer; li <= buckets_[b].first_layer; ++li) {
        const int fwd = replica_first_forward_[d].at(mine[static_cast<std::size_t>(li)]);
        plan_.graph.tasks[static_cast<std::size_t>(fwd)].after_previous_step.push_back(updates[b]);
      }
    replica_last_[d][static_cast<std::size_t>(s)] = updates.back();
  }
}

void Planner::step_optimizer(int s, int embedding_sync) {
  if (p_.priority_buckets) return step_optimizer_per_bucket(s);
  for (std::size_t d = 0; d < replica_last_.size(); ++d) {
    d_ = static_cast<int>(d);
    last_compute_[static_cast<std::size_t>(s)] = replica_last_[d][static_cast<std::size_t>(s)];
    step_optimizer_one(s, embedding_sync);
  }
  std::vector<int> deps;
  for (const auto& last : replica_last_) deps.push_back(last[static_cast<std::size_t>(s)]);
  for (std::size_t u = 0; u < units_.size(); ++u) attributed(u, [&](Unit& x) { x.after_optimizer(*this, s, deps); });  // ZeRO's gathers
}

void Planner::unit_step_waits(std::vector<int>& deps) const {
  for (const auto& u : units_)
    if (const int t = u->step_waits_for(); t >= 0) deps.push_back(t);
}

void Planner::step_optimizer_one(int s, int embedding_sync) {
  // ZeRO-Offload: gradients down over PCIe, the step on the host's cores, parameters back up.
  if (p_.offload_optimizer) return step_optimizer_on_host(s, embedding_sync);
  const Layers mine = stage_layers(s);
  const double shard = update_shard(mine);
  taskgraph::Work w;
  w.name = "optimizer";
  w.kernels = {models::optimizer_kernel(t_.optimizer, shard, update_path(t_.precision))};
  if (const double fp8 = fp8_weight_params(mine); fp8 > 0) w.kernels.push_back(fp8_weight_cast_kernel(fp8));
  std::vector<int> deps;
  unit_step_waits(deps);
  if (last_comm_[static_cast<std::size_t>(s)] >= 0) deps.push_back(last_comm_[static_cast<std::size_t>(s)]);
  if (embedding_sync >= 0) deps.push_back(embedding_sync);
  if (last_compute_[static_cast<std::size_t>(s)] >= 0) deps.push_back(last_compute_[static_cast<std::size_t>(s)]);
  replica_last_[static_cast<std::size_t>(d_)][static_cast<std::size_t>(s)] =
      plan_.graph.add_compute(rep(s), table_.get(w), Category::Optimizer, "optimizer", deps);
}

// An EASGD worker's own optimizer step between exchanges with the centre.
void Planner::local_optimizer() {
  taskgraph::Work w;
  w.name = "optimizer";
  w.kernels = {models::optimizer_kernel(t_.optimizer, layer_params(stage_layers(0)), update_path(t_.precision))};
  last_compute_[0] = plan_.graph.add_compute(rep(0), table_.get(w), Category::Optimizer, "optimizer", {last_compute_[0]});
}

// Replica d_'s exchange with the shared weights, on its own time. Async and Hogwild push the
// gradients and pull the weights the servers (or host memory) updated with them; EASGD steps
// locally, then sends its fp32 weights to the centre and gets the elastic difference back, one
// worker after another. The worker then takes the new weights in.
void Planner::asynchronous_update(int& previous_exchange) {
  const double params = layer_params(stage_layers(0));
  const bool easgd = p_.updates == Updates::Easgd;
  if (easgd) local_optimizer();
  std::vector<int> deps{last_compute_[0]};
  if (easgd && previous_exchange >= 0) deps.push_back(previous_exchange);
  const double gbytes = easgd ? 4.0 : grad_bytes_per_param(t_.precision);
  taskgraph::Collective c{CollectiveOp::AllReduce, p_.algorithm, data_groups(0), params * gbytes, rep(0)};
  // A dedicated server applies the update to its shard: the optimizer reads the gradient and
  // reads and writes its state (Adam: fp32 weights, m, v); EASGD's centre reads the worker's
  // weights and its own and writes its own.
  const double state = optimizer_bytes_per_param(t_.precision, t_.optimizer) + (mixed_precision(t_.precision) ? 0.0 : 4.0);
  c.server_apply_factor = easgd ? 3.0 : (gbytes + 2.0 * state) / gbytes;
  const int id = plan_.graph.add_collective(std::move(c), easgd ? "exchange with centre" : "push and pull", deps);
  previous_exchange = id;
  taskgraph::Work w;
  w.name = easgd ? "elastic update" : "take new weights";
  // EASGD moves its weights toward the centre: read both, write its own (fp32).
  if (easgd) w.kernels = {models::Kernel{"elastic_update", models::KernelKind::Memory, 1, 0, 0, 0, 3.0 * params, 12.0 * params}};
  last_compute_[0] = plan_.graph.add_compute(rep(0), table_.get(w), Category::Optimizer, w.name, {id, last_compute_[0]});
  replica_last_.back()[0] = last_compute_[0];
}

}  // namespace dtsim::strategies
