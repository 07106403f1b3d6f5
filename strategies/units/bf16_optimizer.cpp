// DeepSpeed's BF16_Optimizer: what a DeepSpeed engine runs with bf16 and no ZeRO (microsoft/DeepSpeed
// @38327e0, runtime/engine.py get_data_types and _do_optimizer_sanity_check: gradients accumulated
// in fp32 for bf16 without ZeRO, the optimizer wrapped in runtime/bf16_optimizer.py).
// - After each micro-batch's backward the engine calls update_hp_grads (pipe/engine.py
//   _exec_backward_pass; BF16_Optimizer.backward on the last stage and without a pipeline):
//   every parameter's bf16 gradient is cast to fp32 and added into the fp32 gradient buffer
//   (hp_grad.add_(lp.grad.to(hp_grad.dtype))), and clear_lp_grads zeroes the bf16 gradients
//   (torch._foreach_zero_) before the next backward. All on the compute stream.
// - The step's reduction all-reduces that fp32 buffer, whole (get_grads_for_reduction ->
//   fp32_groups_gradients_flat; buffered_allreduce_fallback): spec.cpp's wire_grad_bytes.
// - The step updates its 1/d shard of fp32 master weights (plan_experts.cpp's update_shard),
//   copies it into the bf16 weights and all-gathers them over the data-parallel group
//   (update_lp_params -> all_gather_dp_groups), then zeroes the fp32 buffer (clear_hp_grads).
#include <map>
#include <utility>

#include "models/model_graph.hpp"
#include "strategies/planner.hpp"
#include "strategies/units/units.hpp"
#include "strategies/update_kernels.hpp"

namespace dtsim::strategies {

// DeepSpeed's synchronous step: dtsim's asynchronous and per-backward (PipeDream) updates are its
// own, priced without it.
bool bf16_optimizer(const ParallelismSpec& p, Precision t) {
  return p.framework.framework == Framework::DeepSpeed && p.zero_stage == 0 && t == Precision::Bf16 &&
         p.updates == Updates::Sync && !p.schedule->updates_per_backward;
}

namespace {

// Bytes per parameter each micro-batch beside the cast up (grad_cast_kernel): the add reads 4 + 4
// and writes 4, and the zeroing writes 2.
constexpr double kAddBytes = 12, kZeroBytes = 2;

models::Kernel memory_kernel(const char* name, double bytes, double params) {
  models::Kernel k;
  k.name = name;
  k.kind = models::KernelKind::Memory;
  k.bytes = bytes;
  k.elems = params;
  return k;
}

bool makes_weight_gradients(const PassKind& kind) { return !kind.forward && kind.part != PipeOp::Part::Input; }

class Bf16Optimizer final : public Unit {
 public:
  const char* name() const override { return "bf16-optimizer"; }

  // One accumulation per backward that makes weight gradients, over the pass's parameters.
  void after_backward(Planner& em, Pass& pass, int last, bool) override {
    if (!on(em) || !makes_weight_gradients(pass.kind)) return;
    const double n = layer_params(*pass.layers);
    if (n <= 0) return;
    taskgraph::Work w;
    w.name = "bf16 optimizer fp32 accumulate";
    w.kernels = {grad_cast_kernel("bf16 gradients to fp32", n), memory_kernel("fp32 gradient add", kAddBytes * n, n),
                 memory_kernel("bf16 gradients zeroed", kZeroBytes * n, n)};
    const int work = em.works().get(std::move(w));
    accumulated_[{pass.stage, em.replica()}] = em.compute(pass.stage, work, {last}, "bf16 optimizer accumulate" + pass.tag);
  }

  // The fp32 buffer is reduced once the last accumulation into it is done, on every replica.
  void before_bucket(Planner&, int s, const Bucket&, std::vector<int>& deps, double&) override {
    for (auto it = accumulated_.lower_bound({s, 0}); it != accumulated_.end() && it->first.first == s; ++it) deps.push_back(it->second);
  }

  void after_optimizer(Planner& em, int s, const std::vector<int>& deps) override {
    if (!on(em)) return;
    const double n = layer_params(em.shape().stage_layers(s));
    if (em.shape().grad_ranks > 1)
      em.collective(CollectiveOp::AllGather, em.data_groups(s), n * weight_bytes_per_param(em.training().precision), deps,
                    "bf16 optimizer gather params");
    taskgraph::Work w;
    w.name = "bf16 optimizer zero fp32 gradients";
    w.kernels = {memory_kernel("fp32 gradients zeroed", 4 * n, n)};
    // Part of the step (clear_hp_grads), counted with it.
    em.plan().graph.add_compute(em.gpu(s), em.works().get(std::move(w)), taskgraph::Category::Optimizer, "bf16 optimizer zero gradients",
                                deps);
  }

  double tasks(const Count& c) const override {
    if (!counted(c)) return 0;
    double accumulations = 0;
    for (int j = 0; j < c.k.chunks; ++j)
      for (const auto& [kind, n] : pass_kinds(c.p.schedule, c.k.pipeline, c.k.stage_of(j), c.k.micro_batches))
        if (makes_weight_gradients(kind)) accumulations += static_cast<double>(n);
    double step = static_cast<double>(c.k.pipeline);  // each stage's zeroing
    for (const auto& x : collectives(c)) step += x.count;
    return accumulations * c.per_replica() + step;
  }
  CollectiveCounts collectives(const Count& c) const override {
    if (!counted(c) || c.k.grad_ranks <= 1) return {};
    return {{CollectiveOp::AllGather, c.p.algorithm, GroupKind::Data, static_cast<double>(c.k.pipeline)}};
  }

  std::string replay_only(const ParallelismSpec&) const override { return "DeepSpeed's BF16_Optimizer"; }

 private:
  static bool on(const Planner& em) { return bf16_optimizer(em.spec(), em.training().precision); }
  static bool counted(const Count& c) { return bf16_optimizer(c.p, c.t.precision); }
  std::map<std::pair<int, int>, int> accumulated_;  // (stage, replica) -> its last accumulation
};

}  // namespace

std::unique_ptr<Unit> make_bf16_optimizer(const ParallelismSpec&) { return std::make_unique<Bf16Optimizer>(); }

}  // namespace dtsim::strategies
