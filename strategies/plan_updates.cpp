#include "strategies/planner.hpp"
#include "strategies/settings.hpp"
#include "strategies/update_kernels.hpp"

namespace dtsim::strategies {

bool Planner::pipeline_reduce_after_flush() const { return strategies::pipeline_reduce_after_flush(p_); }

double Planner::pipeline_reduce_bytes() const { return reduced_grad_bytes(p_, t_.precision); }

SyncCaps sync_caps(const ParallelismSpec& p, Precision precision) {
  const bool after_flush = pipeline_reduce_after_flush(p);
  const double gbytes = reduced_grad_bytes(p, precision);
  // After the flush, in buffers of a fixed element count (buffered_allreduce_fallback).
  const double cap = after_flush ? p.framework.pipeline_reduce_bucket_params * gbytes : p.bucket_bytes;
  return {gbytes, cap, after_flush ? cap : p.first_bucket_bytes, p.expert > 1 ? BucketParams::Dense : BucketParams::All};
}

std::vector<Bucket> sync_buckets(const Layers& mine, const ParallelismSpec& p, Precision precision) {
  // Horovod's buffers are cut by time (the scenario loader refuses pipelines and experts with it).
  if (p.fusion.on()) return fusion_buffers(mine, reduced_grad_bytes(p, precision), p.fusion);
  const SyncCaps c = sync_caps(p, precision);
  return make_buckets(mine, c.grad_bytes, c.cap, c.first_cap, c.which);
}

namespace {
// What compression does to a bucket: bytes on the wire per gradient byte, encode/decode passes
// over the bucket in HBM, and the collective that carries it.
struct Compressed {
  double wire = 1.0, passes = 0.0;
  CollectiveOp op;
};
Compressed compressed(const ParallelismSpec& p, double gbytes, int grad_ranks) {
  Compressed c{1.0, 0.0, p.zero_stage == 0 ? CollectiveOp::AllReduce : CollectiveOp::ReduceScatter};
  switch (p.compression) {
    case Compression::None: break;
    case Compression::Fp16: c.wire = 2.0 / gbytes; c.passes = c.wire < 1.0 ? 2.0 : 0.0; break;
    case Compression::Int8: c.wire = 1.0 / gbytes; c.passes = 3.0; break;
    case Compression::TopK:  // each rank's kept values and indices are gathered by all
      c.wire = p.topk_ratio * (gbytes + 4.0) / gbytes * grad_ranks;
      c.passes = 4.0;  // selection reads the bucket several times; decoding scatter-adds
      c.op = CollectiveOp::AllGather;
      break;
  }
  return c;
}
}  // namespace

bool compresses_on_gpu(const ParallelismSpec& p, Precision precision, int grad_ranks) {
  return compressed(p, reduced_grad_bytes(p, precision), grad_ranks).passes > 0;
}

CollectiveOp bucket_op(const ParallelismSpec& p) { return compressed(p, 1.0, 1).op; }

void Planner::synchronise_gradients(int s) {
  if (grad_ranks() <= 1 || p_.zero_stage == 3) return;
  const Layers& mine = stage_layers(s);
  const auto buckets = sync_buckets(mine, p_, t_.precision);
  if (s == 0) plan_.gradient_buckets = buckets.size();
  for (std::size_t b = 0; b < buckets.size(); ++b) synchronise_bucket(s, mine, buckets[b], b);
  for (std::size_t u = 0; u < units_.size(); ++u) attributed(u, [&](Unit& x) { x.after_gradient_sync(*this, s); });  // experts
}

void Planner::synchronise_bucket(int s, const Layers& mine, const Bucket& bucket, std::size_t b) {
  const bool after_flush = pipeline_reduce_after_flush();
  const double gbytes = reduced_grad_bytes(p_, t_.precision);
  const Compressed c = compressed(p_, gbytes, grad_ranks());
  std::vector<int> deps;
  for (std::size_t d = 0; d < replica_final_.size(); ++d) {
    if (p_.overlap_grad_reduce && !after_flush) deps.push_back(replica_final_[d].at(mine[static_cast<std::size_t>(bucket.ready_after_layer)]));
    else deps.push_back(replica_last_[d][static_cast<std::size_t>(s)]);
  }
  if (after_flush && tied_sync_ >= 0 && (s == 0 || s == p_.pipeline - 1)) deps.push_back(tied_sync_);
  // A unit may make the bucket wait for more (tensor fusion's negotiation) and cost more to issue.
  double launch_s = 0;
  for (std::size_t u = 0; u < units_.size(); ++u) attributed(u, [&](Unit& x) { x.before_bucket(*this, s, bucket, deps, launch_s); });
  // Buckets queue in the order they fill, unless a unit orders them (priority order: one stream).
  bool ordered = false;
  for (const auto& u : units_) ordered = ordered || u->orders_buckets();
  const int previous = ordered ? -1 : last_comm_[static_cast<std::size_t>(s)];
  if (previous >= 0) deps.push_back(previous);
  if (c.passes > 0) {  // compression kernels share the GPU with backward
    taskgraph::Work w;
    w.name = "compress";
    w.kernels = {models::Kernel{"compress", models::KernelKind::Memory, 1, 0, 0, 0, 4.0 * bucket.bytes / gbytes, c.passes * bucket.bytes}};
    const int work = table_.get(w);
    std::vector<int> done;
    for (std::size_t d = 0; d < replica_final_.size(); ++d) {
      d_ = static_cast<int>(d);
      done.push_back(plan_.graph.add_compute(rep(s), work, Category::Communication, "compress bucket " + std::to_string(b), deps));
    }
    deps = done;
  }
  std::vector<int> ready;  // the replicas' gradients; with backup workers only some are awaited
  if (p_.backup_workers > 0) std::swap(ready, deps);
  if (previous >= 0 && p_.backup_workers > 0) deps.push_back(previous);
  taskgraph::Collective sum{c.op, p_.algorithm, data_groups(s), bucket.bytes * c.wire};
  sum.launch_s = launch_s;
  const int id = plan_.graph.add_collective(std::move(sum), std::string(taskgraph::to_string(c.op)) + " bucket " + std::to_string(b), deps);
  if (p_.backup_workers > 0) {
    auto& task = plan_.graph.tasks[static_cast<std::size_t>(id)];
    task.any_deps = std::move(ready);
    task.quorum = static_cast<int>(task.any_deps.size()) - p_.backup_workers;
  }
  last_comm_[static_cast<std::size_t>(s)] = id;
  for (std::size_t u = 0; u < units_.size(); ++u) attributed(u, [&](Unit& x) { x.after_bucket(*this, s, bucket, id); });
}

void Planner::step_optimizer(int s, int embedding_sync) {
  for (std::size_t u = 0; u < units_.size(); ++u)
    if (units_[u]->takes_step()) return attributed(u, [&](Unit& x) { x.step(*this, s); });  // priority order's per bucket
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
  for (std::size_t u = 0; u < units_.size(); ++u)
    if (units_[u]->takes_replica_step()) return attributed(u, [&](Unit& x) { x.replica_step(*this, s, embedding_sync); });
  const Layers& mine = stage_layers(s);
  const double shard = update_shard(mine);
  taskgraph::Work w;
  w.name = "optimizer";
  w.kernels = update_kernels(p_, t_, shard);
  if (const double fp8 = fp8_weight_params(mine); fp8 > 0) w.kernels.push_back(fp8_weight_cast_kernel(fp8, t_.memory.fp8_weight_copies));
  std::vector<int> deps;
  unit_step_waits(deps);
  if (last_comm_[static_cast<std::size_t>(s)] >= 0) deps.push_back(last_comm_[static_cast<std::size_t>(s)]);
  if (embedding_sync >= 0) deps.push_back(embedding_sync);
  if (last_compute_[static_cast<std::size_t>(s)] >= 0) deps.push_back(last_compute_[static_cast<std::size_t>(s)]);
  replica_last_[static_cast<std::size_t>(d_)][static_cast<std::size_t>(s)] =
      plan_.graph.add_compute(rep(s), table_.get(w), Category::Optimizer, "optimizer", deps);
}

}  // namespace dtsim::strategies
