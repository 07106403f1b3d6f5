#include <algorithm>
#include <cmath>

#include "strategies/planner.hpp"
#include "strategies/stack_memory.hpp"

namespace dtsim::strategies {

// Backward rebuilds one checkpointed run at a time in full: a block under full recomputation,
// a whole chunk under stage recomputation, one micro-batch at a time. The largest on stage s.
double Planner::largest_rebuild(int s) const {
  double rebuild = 0;
  for (int j = s; j < k_.chunks; j += p_.pipeline)
    rebuild = std::max(rebuild, k_.checkpoints.rebuilt(k_.chunk_layers[static_cast<std::size_t>(j)]));
  return rebuild;
}

MemoryBreakdown Planner::stage_memory(int s) const {
  const Layers& mine = stage_layers(s);
  const double rebuild = largest_rebuild(s);
  MemoryBreakdown m = state_memory(mine, shared_table_copy(s));
  if (p_.offload_optimizer) m.optimizer = 0;
  // ZeRO-Offload with partitioned gradients copies each reduce bucket to the host as it fills
  // (DeepSpeed stage_1_and_2.py, cpu_offload): the GPU keeps two buckets, not the gradients.
  if (p_.offload_optimizer && p_.zero_stage >= 2)
    m.gradients = std::min(m.gradients, 2.0 * p_.framework.reduce_bucket_params * grad_bytes_per_param(t_.precision));
  m.params *= weight_versions(p_.schedule, p_.pipeline, s);  // PipeDream's stashed versions
  // FP8 weight copies where the stack keeps them (Transformer Engine: the copy and its transpose).
  // Only graphs built for FP8 have FP8 weights (models/transformer_ops.cpp, fp8_linear): the walk
  // over every op of the stage is skipped for the others, which a sweep plans by the thousand.
  const double copy = fp8_copy_bytes_per_param(t_.memory.fp8_weight_copies);
  if (copy > 0 && g_.options.fp8) m.params += copy * fp8_weight_params(mine);
  if (!p_.offload_optimizer) m.gradients += state_bucket_bytes(t_.precision, p_.zero_stage, p_.framework, t_.memory.buffers);
  if (p_.context > 1) {
    // While a layer attends: the ring's K/V chunk in flight beside the one in use, or the whole
    // sequence's gathered K and V.
    double kv = 0;
    for (const auto* l : mine) kv = std::max(kv, l->context_kv_bytes);
    m.other += (p_.context_all_gather ? p_.context : 2.0) * kv;
  }
  // Live activations follow the schedule: a forward leaves its micro-batch's activations until
  // the matching backward frees them.
  double live = live_before_window(s), peak = live;
  for (const auto& op : seq_[static_cast<std::size_t>(s)]) {
    const double a = chunk_kept(op.chunk, s);
    live += activation_change(s, op, a);
    peak = std::max(peak, live);
  }
  if (const auto known = known_peak(s)) peak = *known;  // no schedule walked (plan_layout.cpp)
  m.activations = peak + rebuild;
  if (p_.activation_offload) {
    // On the GPU only the layer being run and the one being copied; the rest waits on the host
    // (copies keeping pace with compute).
    double layer = 0;
    for (const auto* l : mine) layer = std::max(layer, k_.checkpoints.kept({l}));
    m.activations = std::min(peak, 2.0 * layer) + rebuild;
  }
  if (p_.zero_stage == 3 && shard_ranks() > 1 && p_.framework.max_live_params > 0) {
    // DeepSpeed: what its coordinator holds gathered at worst, prefetch bounded by
    // stage3_max_live_parameters and the prefetch bucket.
    m.other += zero3_gathered_peak(mine, p_.framework, k_.checkpoints) * weight_bytes_per_param(t_.precision);
  } else if (p_.zero_stage == 3 && shard_ranks() > 1 && p_.pipeline > 1) {
    // Inside a pipeline stage FSDP2 keeps the stage's layers gathered from the first forward to
    // the end of the step and accumulates their gradients unsharded until the last backward
    // (strategies/units/zero.cpp): the whole stage's weights and gradients beside the shards.
    m.other += layer_params(mine) * weight_bytes_per_param(t_.precision);
    m.gradients += layer_params(mine) * grad_bytes_per_param(t_.precision);
  } else if (p_.zero_stage == 3 && shard_ranks() > 1) {
    // The gathered layer and its prefetch; under torchao's float8 all-gather a layer's FP8 GEMM
    // weights arrive, and stay unsharded, in one byte each.
    const double wbytes = weight_bytes_per_param(t_.precision);
    double largest = 0;
    for (const auto* l : mine) {
      const double fp8 = p_.framework.fp8_all_gather ? fp8_weight_params({l}) : 0.0;
      largest = std::max(largest, (l->params() - fp8) * wbytes + fp8);
    }
    m.other += 2.0 * largest;
  }
  return m;
}

namespace {

// The loss op's logits on these layers (its LossForward kernel's elements and their size).
std::pair<double, double> loss_logits(const Layers& layers) {
  for (const auto* l : layers) {
    if (l->kind != models::LayerKind::Head) continue;
    for (const auto& op : l->ops)
      for (const auto& k : op.forward)
        if (k.role == models::KernelRole::LossForward) return {k.elems, k.elem_bytes};
  }
  return {0.0, 0.0};
}

}  // namespace

// The schedule's peak on the stage holding the loss falls as a micro-batch's forward ends, where
// its backward starts with the loss: what the stack's loss keeps beyond the graph's 4 bytes a
// logit, and what its backward holds at once, which is freed before any checkpointed block is
// rebuilt. A step of one micro-batch under a stack that frees its gradients between steps reaches
// that peak with none allocated, and holds them all only once the activations are freed: the peak
// is whichever is larger. Data-parallel replicas keep DDP's or the framework's buckets, so only
// one replica or ZeRO-3's sharded gradients qualify.
void Planner::at_peak(int s, MemoryBreakdown& m) const {
  const Layers& mine = stage_layers(s);
  if (const auto [logits, e] = loss_logits(mine); logits > 0 && t_.memory.loss != Loss::Fused) {
    const double rebuild = largest_rebuild(s);
    const double backward = loss_backward_bytes(t_.memory.loss, e) * logits;
    m.activations += (loss_kept_bytes(t_.memory.loss, e) - 4.0) * logits + std::max(0.0, backward - rebuild);
  }
  const bool sharded = p_.zero_stage == 3 && shard_ranks() > 1;
  if (t_.memory.gradients_set_to_none && k_.micro_batches == 1 && (sharded || grad_ranks() == 1)) {
    if (m.activations >= m.gradients) m.gradients = 0;
    else m.activations = 0;
  }
}

}  // namespace dtsim::strategies

namespace dtsim::strategies {

double Planner::stage_allocator_slack(int s, const MemoryBreakdown& m, SlackSeen& seen) const {
  if (t_.memory.allocator != Allocator::PytorchCaching) return allocator_slack(t_.memory.allocator, {}, k_.checkpoints, {});
  const Layers& mine = stage_layers(s);
  TraceOptions o;
  // As many micro-batches in flight as the stage's activation peak holds (1F1B's warm-up).
  const double kept = k_.checkpoints.kept(mine);
  o.in_flight = kept > 0 ? static_cast<int>(std::max(1L, std::lround(m.activations / kept))) : 1;
  if (p_.zero_stage == 3 && shard_ranks() > 1) {
    o.gathered_bytes_per_param = weight_bytes_per_param(t_.precision);
    o.grad_bytes_per_param = grad_bytes_per_param(t_.precision);
  }
  o.activation_bytes = g_.options.activation_bytes;
  auto signature = trace_signature(mine, k_.checkpoints, o);
  for (const auto& [known, slack] : seen)
    if (known == signature) return slack;
  const double slack = allocator_slack(t_.memory.allocator, mine, k_.checkpoints, o);
  seen.emplace_back(std::move(signature), slack);
  return slack;
}

}  // namespace dtsim::strategies
