// Horovod's tensor fusion (strategies/tensor_fusion.hpp; docs/stacks.md "Horovod"). The buffers
// themselves are cut by sync_buckets (plan_updates.cpp), so the emitter and the budget count the
// same ones; this unit adds what Horovod's background thread does around each:
// - the first buffer of a cycle tick waits for the tick, then for the cycle's negotiation (which
//   tensors every rank has ready), run as small MPI collectives on the data-parallel group;
// - a buffer of more than one tensor is copied into the fusion buffer before its all-reduce and
//   out after it, on the same stream (a single tensor is reduced in place).
// Sources, horovod/horovod: v0.16.0 horovod/common/operations.cc (RunLoopOnce 2029-2038: one cycle
// per cycle time; the coordinator's MPI_Gather/MPI_Gatherv of requests 2091/2108 and MPI_Bcast of
// the fused responses 2285-2286; cudaMemcpyAsync into the buffer 1233-1242, out at 1462, on the
// NCCL stream; the background thread moves on while a finalizer thread waits, 1471-1486);
// v0.28.1 horovod/common/response_cache.cc 382-392, 428 (one MPI_Allreduce, MPI_BAND, of a bit
// vector of the cached tensors + NUM_STATUS_BITS 3, in long longs; mpi/mpi_controller.cc 117-118),
// ops/nccl_operations.cc 230-232, 267-269 (the copies only when entries.size() > 1).
#include <cmath>

#include "strategies/planner.hpp"
#include "strategies/units/units.hpp"

namespace dtsim::strategies {

namespace {

// Horovod's coordinator without the response cache (before v0.17.0): rank 0 gathers every rank's
// ready list and broadcasts the fused responses. MPI sends short gathers and broadcasts down a
// binomial tree (Thakur, Rabenseifner and Gropp 2005, MPICH): a Reduce and a Broadcast on dtsim's
// binomial tree. The messages (tensor names) are left at 8 bytes: latency-bound at these sizes.
constexpr double kRequestBytes = 8;
// The bit vector: a bit per cached tensor and 3 status bits, in 8-byte words.
double bitvector_bytes(int tensors) { return 8.0 * std::ceil((tensors + 3) / 64.0); }

class TensorFusionUnit final : public Unit {
 public:
  explicit TensorFusionUnit(const ParallelismSpec&) {}
  const char* name() const override { return "tensor-fusion"; }

  void before_bucket(Planner& em, int s, const Bucket& b, std::vector<int>& deps, double& launch_s) override;

  // Per tick: the cached path's one all-reduce, or the coordinator's gather and broadcast.
  double tasks(const Count& c) const override {
    double n = 0;
    for (const auto& k : collectives(c)) n += k.count;
    return n;
  }
  CollectiveCounts collectives(const Count& c) const override {
    using taskgraph::CollectiveOp, taskgraph::Algorithm;
    if (!c.k.sync || c.k.grad_ranks <= 1 || c.p.zero_stage == 3) return {};
    double ticks = 0;
    for (int s = 0; s < c.k.pipeline; ++s)
      for (const auto& b : sync_buckets(c.k.stage_layers(s), c.p, c.t.precision)) ticks += b.opens_tick ? 1 : 0;
    if (c.p.fusion.response_cache) return {{CollectiveOp::AllReduce, Algorithm::HalvingDoubling, GroupKind::Data, ticks}};
    return {{CollectiveOp::Reduce, Algorithm::Tree, GroupKind::Data, ticks}, {CollectiveOp::Broadcast, Algorithm::Tree, GroupKind::Data, ticks}};
  }
  std::string replay_only(const ParallelismSpec&) const override { return "tensor fusion (Horovod)"; }

 private:
  int tensors_ = 0;  // the stage's gradient tensors, for the bit vector
  int stage_ = -1;
};

void TensorFusionUnit::before_bucket(Planner& em, int s, const Bucket& b, std::vector<int>& deps, double& launch_s) {
  const auto& f = em.spec().fusion;
  if (b.tensors > 1) launch_s += 2.0 * b.bytes * f.copy_s_per_byte;  // into the buffer and out
  if (!b.opens_tick) return;
  if (s != stage_) {
    stage_ = s;
    tensors_ = 0;
    for (const auto& x : sync_buckets(em.shape().stage_layers(s), em.spec(), em.training().precision)) tensors_ += x.tensors;
  }
  // The thread sleeps from the buffer's last gradient to the tick (ready times from the cost
  // model, strategies/tensor_fusion.hpp), then negotiates.
  const auto ready = static_cast<std::size_t>(b.ready_after_layer);
  const double at = ready < f.ready_s.size() ? f.ready_s[ready] : 0.0;
  taskgraph::Collective first;
  first.groups = em.data_groups(s);
  first.launch_s = std::max(0.0, b.tick * f.cycle_s - at);
  const std::string tick = " tick " + std::to_string(b.tick);
  auto& graph = em.plan().graph;
  if (f.response_cache) {
    first.op = taskgraph::CollectiveOp::AllReduce;
    first.algorithm = taskgraph::Algorithm::HalvingDoubling;
    first.bytes = bitvector_bytes(tensors_);
    deps = {graph.add_collective(std::move(first), "negotiate" + tick, deps)};
    return;
  }
  first.op = taskgraph::CollectiveOp::Reduce;
  first.algorithm = taskgraph::Algorithm::Tree;
  first.bytes = kRequestBytes;
  taskgraph::Collective back{taskgraph::CollectiveOp::Broadcast, taskgraph::Algorithm::Tree, first.groups, kRequestBytes};
  const int gathered = graph.add_collective(std::move(first), "negotiate requests" + tick, deps);
  deps = {graph.add_collective(std::move(back), "negotiate responses" + tick, {gathered})};
}

}  // namespace

std::unique_ptr<Unit> make_tensor_fusion(const ParallelismSpec& p) { return std::make_unique<TensorFusionUnit>(p); }

}  // namespace dtsim::strategies
