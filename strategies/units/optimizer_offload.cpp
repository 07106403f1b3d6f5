// ZeRO-Offload (Ren et al. 2021, Sec. 4): 16-bit gradients go down to the host as backward
// produces them (DeepSpeed copies each reduced bucket), the CPU optimizer runs on the host's
// cores at its memory bandwidth, and the 16-bit parameters come back up. The last backward runs
// layer by layer so each bucket's copy can follow its last layer. What it keeps in host memory
// is the emitter's (Planner::host_memory), what leaves the GPU plan_memory.cpp's.
#include <algorithm>

#include "strategies/planner.hpp"
#include "strategies/units/units.hpp"

namespace dtsim::strategies {

namespace {

// Gradient buckets as DeepSpeed's reduce buckets fill.
std::vector<Bucket> host_buckets(const Layers& mine, const ParallelismSpec& p, Precision precision) {
  const double gbytes = grad_bytes_per_param(precision);
  const double cap = p.framework.reduce_bucket_params * gbytes;
  return make_buckets(mine, gbytes, cap, cap);
}

class OptimizerOffload final : public Unit {
 public:
  explicit OptimizerOffload(const ParallelismSpec&) {}
  const char* name() const override { return "optimizer-offload"; }

  bool splits(const PassKind& kind) const override { return !kind.forward && kind.final; }
  bool takes_replica_step() const override { return true; }
  void replica_step(Planner& em, int s, int embedding_sync) override;

  // Per stage and replica: each bucket's copy down, the host step, the parameters' copy up.
  double tasks(const Count& c) const override {
    if (!c.k.sync || c.p.schedule->updates_per_backward || c.step_taken()) return 0;
    double n = 0;
    for (int s = 0; s < c.k.pipeline; ++s) n += static_cast<double>(host_buckets(c.k.stage_layers(s), c.p, c.t.precision).size()) + 2;
    return n * c.k.replicas;
  }
  std::string replay_only(const ParallelismSpec&) const override { return "optimizer offload"; }
};

void OptimizerOffload::replica_step(Planner& em, int s, int embedding_sync) {
  const auto& p = em.spec();
  const auto& t = em.training();
  const Layers mine = em.shape().stage_layers(s);
  const double shards = p.zero_stage >= 1 ? em.shape().grad_ranks : 1;
  const double shard = layer_params(mine) / shards;
  std::vector<int> downs;
  // With data parallelism each copy waits for the reductions, alone each follows the backward of
  // the bucket's last layer.
  const auto buckets = host_buckets(mine, p, t.precision);
  const auto& finals = em.finals(static_cast<std::size_t>(em.replica()));
  const int comm = em.comm_stream(s);
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    std::vector<int> deps;
    if (em.shape().grad_ranks > 1 && comm >= 0) deps.push_back(comm);
    const auto it = finals.find(mine[static_cast<std::size_t>(buckets[b].ready_after_layer)]);
    deps.push_back(it != finals.end() ? it->second : em.compute_stream(s));
    downs.push_back(em.pcie_copy(s, buckets[b].bytes / shards, deps, true, "gradients to host " + std::to_string(b)));
  }
  taskgraph::Work w;
  w.name = "host optimizer";
  // Per parameter: read the fp32 weight, gradient and optimizer state, write weight and state
  // back and the 16-bit copy for the GPU (DeepSpeed csrc/adam/cpu_adam_impl.cpp, Step_AVX).
  const double opt = optimizer_bytes_per_param(t.precision, t.optimizer);
  const double traffic = 2.0 * opt + 4.0 + weight_bytes_per_param(t.precision);
  const double flops = t.optimizer == models::OptimizerKind::Adam ? 12.0 : 4.0;  // Adam's update, per element
  const auto& host = em.host();
  w.fixed_seconds = std::max(shard * traffic / host.memory_bandwidth_per_gpu, shard * flops / (host.cores_per_gpu * host.core_flops));
  std::vector<int> deps = downs;
  if (embedding_sync >= 0) deps.push_back(embedding_sync);
  if (em.compute_stream(s) >= 0) deps.push_back(em.compute_stream(s));
  em.unit_step_waits(deps);
  const int step = em.plan().graph.add_compute(em.gpu(s), em.works().get(std::move(w)), taskgraph::Category::Optimizer, "host optimizer", deps);
  em.replica_last()[static_cast<std::size_t>(em.replica())][static_cast<std::size_t>(s)] =
      em.pcie_copy(s, shard * weight_bytes_per_param(t.precision), {step}, false, "parameters to GPU");
}

}  // namespace

std::unique_ptr<Unit> make_optimizer_offload(const ParallelismSpec& p) { return std::make_unique<OptimizerOffload>(p); }

}  // namespace dtsim::strategies
