#include "strategies/framework.hpp"

#include <algorithm>
#include <map>
#include <utility>

#include "strategies/recompute.hpp"

namespace dtsim::strategies {

// Defaults as the frameworks ship them.
// DeepSpeed (microsoft/DeepSpeed at 38327e0, 2025-02):
// - deepspeed/runtime/zero/config.py: prefetch_bucket_size 5e7 (stage3_prefetch_bucket_size),
//   param_persistence_threshold 1e5, max_reuse_distance 1e9, max_live_parameters 1e9,
//   reduce_bucket_size 5e8.
// - zero/partitioned_param_coordinator.py, fetch_sub_module: gathers the current sub-module's
//   parameters, makes the compute stream wait for the all-gather stream, then prefetches the
//   next parameters of the recorded trace until prefetch_bucket_size elements are in flight (one
//   coalesced all-gather per call); __params_to_release keeps a parameter used again within
//   max_reuse_distance elements. Hooks fire on every forward, the recompute forward included.
// - zero/stage3.py: __add_grad_to_ipg_bucket reduces the bucket when the next gradient would
//   overflow reduce_bucket_size, every micro-batch; independent_gradient_partition_epilogue
//   flushes it and synchronises the reduce stream; communication_data_type defaults to the
//   model's dtype (runtime/engine.py, communication_data_type).
// - runtime/pipe/schedule.py TrainSchedule ends with ReduceTiedGrads, ReduceGrads, OptimizerStep;
//   pipe/engine.py _exec_reduce_grads reduces in buffers of MEMORY_OPT_ALLREDUCE_SIZE = 5e8
//   elements (runtime/engine.py), from the BF16 optimizer's fp32 gradients
//   ("BF16 Optimizer is hardcoded for fp32 gradient accumulation"); tied weights' _hp_grad
//   (fp32) are all-reduced in _exec_reduce_tied_grads.
// - activation_checkpointing/checkpointing.py with cpu_checkpointing: inputs moved to the host
//   with a plain .cpu()/.to() on the compute stream.
// PyTorch FSDP (torch/distributed/fsdp, FullyShardedDataParallel defaults):
// - one flat parameter per wrap unit (transformer_auto_wrap_policy: a block), all-gathered
//   whole; the root unit is not resharded after forward (_runtime_utils._reshard);
// - backward_prefetch BACKWARD_PRE: the next unit's all-gather is issued before the current
//   unit's gradient computation; forward_prefetch False; limit_all_gathers True: at most two
//   all-gathers in flight (_limits_utils / _free_event_queue), so one gather ahead in forward;
// - reduce-scatter per unit in its post-backward hook, in the parameter dtype unless
//   MixedPrecision.reduce_dtype; the post-backward final callback makes the compute stream wait
//   for the post-backward stream at the end of each backward;
// - activation offload with torch.autograd.graph.save_on_cpu: copies on the current stream.
// Megatron-LM: keeps dtsim's existing idealised schedule; Megatron-Core's activation CPU
// offloading (cpu_offload.py) copies on its own stream, overlapped.
// What one NCCL collective call costs before any byte moves, beyond the per-step latencies the
// network model charges: nccl-tests' reduce_scatter_perf on 2 nodes x 4 GPUs times a 0-byte
// call at 5.70, 5.92, 5.52, 5.53 and 5.57 us (out of place; mean 5.65 us), NVIDIA/nccl-tests
// issue 128, https://github.com/NVIDIA/nccl-tests/issues/128 (comment of 2023-02-02). A 0-byte
// collective launches no transfer, so this is the call's own path (argument checks, enqueue,
// the stream's kernel launch and event), which every ZeRO-3 gather and reduce-scatter pays.
constexpr double kNcclCallSeconds = 5.65e-6;

FrameworkSpec framework_defaults(Framework f) {
  FrameworkSpec s;
  s.framework = f;
  switch (f) {
    case Framework::MegatronLM:
      s.forward_prefetch_depth = s.backward_prefetch_depth = -1;
      s.sync_after_backward = false;
      break;
    case Framework::DeepSpeed:
      s.max_live_params = 1e9;
      s.collective_launch_s = kNcclCallSeconds;
      s.pipeline_reduce_after_flush = true;
      s.activation_offload_overlapped = false;
      break;
    case Framework::Fsdp:
      s.collective_launch_s = kNcclCallSeconds;
      s.gather_per_layer = true;
      s.persistence_threshold_params = 0;
      s.max_reuse_distance_params = 0;
      s.regather_for_recompute = false;
      s.root_kept_gathered = true;
      s.reduce_bucket_params = 0;
      s.activation_offload_overlapped = false;
      break;
  }
  return s;
}

const char* to_string(Framework f) {
  switch (f) {
    case Framework::MegatronLM: return "megatron-lm";
    case Framework::DeepSpeed: return "deepspeed";
    case Framework::Fsdp: return "fsdp";
  }
  return "?";
}

namespace {
bool block(const models::Layer* l) { return l->kind == models::LayerKind::Block; }

// How the uses of parameters group into gather units. FSDP's root unit: every parameter outside
// the wrapped blocks, gathered once with its first use; otherwise each sub-module is its own unit.
struct Units {
  const std::vector<const models::Layer*>& layers;
  const FrameworkSpec& f;
  double root_params = 0;  // the root unit's size

  Units(const std::vector<const models::Layer*>& ls, const FrameworkSpec& spec, const std::vector<ParamUse>& uses)
      : layers(ls), f(spec) {
    for (const auto& u : uses)
      if (root(u) && !u.backward) root_params += u.params;
  }
  bool root(const ParamUse& u) const { return f.gather_per_layer && !block(layers[static_cast<std::size_t>(u.layer)]); }
  std::pair<int, int> key(const ParamUse& u) const { return root(u) ? std::pair{-1, -1} : std::pair{u.layer, u.op}; }
  bool persistent(const ParamUse& u) const { return u.params < f.persistence_threshold_params; }
  double size(const ParamUse& u) const { return root(u) ? root_params : u.params; }

  // Whether use t's unit stays gathered after it: FSDP's root unit when kept, or a unit used again
  // before max_reuse_distance elements of other sub-modules are used (DeepSpeed).
  bool kept_after(const std::vector<ParamUse>& uses, std::size_t t) const {
    if (root(uses[t]) && f.root_kept_gathered) return true;
    const auto k = key(uses[t]);
    double between = 0;
    for (std::size_t v = t + 1; v < uses.size(); ++v) {
      if (key(uses[v]) == k) return between < f.max_reuse_distance_params;
      between += uses[v].params;
      if (between >= f.max_reuse_distance_params) return false;
    }
    return false;
  }
};

}  // namespace

std::vector<ParamUse> param_uses(const std::vector<const models::Layer*>& layers, const FrameworkSpec& f, const Checkpoints& ck) {
  std::vector<ParamUse> out;
  const int n = static_cast<int>(layers.size());
  auto ops = [&](int li, bool backward, bool reversed, bool recompute) {
    const auto& l = *layers[static_cast<std::size_t>(li)];
    if (f.gather_per_layer) {
      if (l.params() > 0) out.push_back({li, -1, l.params(), backward});
      return;
    }
    // The recompute forward uses the weights of the ops it re-runs (op-level checkpointing: some).
    const auto again = reruns(l, recompute ? ck.of(l) : Recompute::None);
    const int m = static_cast<int>(l.ops.size());
    for (int k = 0; k < m; ++k) {
      const int oi = reversed ? m - 1 - k : k;
      const double p = l.ops[static_cast<std::size_t>(oi)].params;
      if (p > 0 && (!recompute || again[static_cast<std::size_t>(oi)].any())) out.push_back({li, oi, p, backward});
    }
  };
  for (int li = 0; li < n; ++li) ops(li, false, false, false);
  for (int li = n - 1; li >= 0; --li) {
    const bool rerun = checkpoints_block(ck.of(*layers[static_cast<std::size_t>(li)]));
    if (rerun && f.regather_for_recompute && !f.gather_per_layer) ops(li, true, false, true);
    ops(li, true, true, false);
  }
  return out;
}

namespace {
// The tensors of use u that DeepSpeed before 0.6 gathers one by one: those at or above the
// persistence threshold (ds_persist is set per parameter, partition_parameters.py).
std::vector<double> gathered_tensors(const std::vector<const models::Layer*>& layers, const ParamUse& u, const FrameworkSpec& f) {
  std::vector<double> out;
  for (double t : models::param_tensors(layers[static_cast<std::size_t>(u.layer)]->ops[static_cast<std::size_t>(u.op)]))
    if (t >= f.persistence_threshold_params) out.push_back(t);
  return out;
}
bool per_tensor(const FrameworkSpec& f) { return f.per_parameter && !f.gather_per_layer; }
}  // namespace

std::vector<Gather> zero3_gathers(const std::vector<const models::Layer*>& layers, const FrameworkSpec& f, const Checkpoints& ck,
                                  std::vector<int>* wait) {
  const auto uses = param_uses(layers, f, ck);
  if (wait) wait->assign(uses.size(), -1);
  const Units units(layers, f, uses);

  std::map<std::pair<int, int>, bool> available;  // gathered (or in flight) now
  std::vector<Gather> out;
  bool open = false;  // the last gather (or burst) still takes uses (DeepSpeed's prefetch coalescing)
  double burst_params = 0;
  int burst = -1;
  for (std::size_t t = 0; t < uses.size(); ++t) {
    const auto& u = uses[t];
    const auto tensors = per_tensor(f) ? gathered_tensors(layers, u, f) : std::vector<double>{};
    if (per_tensor(f) ? tensors.empty() : units.persistent(u)) continue;
    const auto k = units.key(u);
    if (!available[k]) {
      const double p = units.size(u);
      if (per_tensor(f)) {
        if (!open || burst_params >= f.prefetch_bucket_params) burst_params = 0, ++burst, open = true;
        for (double x : tensors) out.push_back({x, u.layer, u.backward, static_cast<int>(t), burst});
        burst_params += p;
      } else if (open && !f.gather_per_layer && out.back().params < f.prefetch_bucket_params) {
        out.back().params += p;
      } else {
        out.push_back({p, u.layer, u.backward, static_cast<int>(t), static_cast<int>(out.size())});
        open = !f.gather_per_layer;
      }
      if (wait) (*wait)[t] = static_cast<int>(out.size()) - 1;
      available[k] = true;
    }
    if (!units.kept_after(uses, t)) available[k] = false;
  }
  return out;
}

double zero3_gathered_peak(const std::vector<const models::Layer*>& layers, const FrameworkSpec& f, const Checkpoints& ck) {
  const auto uses = param_uses(layers, f, ck);
  const Units units(layers, f, uses);
  std::map<std::pair<int, int>, double> size;
  for (const auto& u : uses) size[units.key(u)] = units.size(u);
  std::map<std::pair<int, int>, bool> available;
  double peak = 0;
  for (std::size_t t = 0; t < uses.size(); ++t) {
    const auto& u = uses[t];
    if (units.persistent(u)) continue;
    const auto k = units.key(u);
    available[k] = true;
    double held = 0;
    for (const auto& [kk, on] : available)
      if (on) held += size[kk];
    const int depth = u.backward ? f.backward_prefetch_depth : f.forward_prefetch_depth;
    double cap = f.gather_per_layer ? 0 : f.prefetch_bucket_params;
    if (f.max_live_params > 0) cap = std::min(cap, f.max_live_params - held);
    double ahead = 0;
    std::map<std::pair<int, int>, bool> queued;
    for (std::size_t v = t + 1; v < uses.size() && depth != 0; ++v) {
      const auto kv = units.key(uses[v]);
      if (units.persistent(uses[v]) || available[kv] || queued[kv]) continue;
      // FSDP and megatron-lm prefetch the next gather unit whole; DeepSpeed while under the cap.
      if (f.gather_per_layer || f.framework == Framework::MegatronLM) {
        ahead = size[kv];
        break;
      }
      if (ahead >= cap) break;
      ahead += size[kv];
      queued[kv] = true;
    }
    peak = std::max(peak, held + ahead);
    if (!units.kept_after(uses, t)) available[k] = false;  // as zero3_gathers releases
  }
  return peak;
}

std::vector<double> zero3_reduce_buckets(const std::vector<const models::Layer*>& layers, const FrameworkSpec& f) {
  std::vector<double> out;
  double cur = 0, root = 0;
  std::vector<double> held;  // per_parameter: the bucket's tensors, each reduce-scattered alone
  auto flush = [&] {
    if (per_tensor(f)) out.insert(out.end(), held.begin(), held.end());
    else out.push_back(cur);
    cur = 0;
    held.clear();
  };
  for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
    const auto& l = **it;
    if (f.reduce_bucket_params <= 0) {  // one reduce-scatter per unit; FSDP's root unit last
      if (f.gather_per_layer && !block(&l)) root += l.params();
      else if (l.params() > 0) out.push_back(l.params());
      continue;
    }
    for (auto op = l.ops.rbegin(); op != l.ops.rend(); ++op) {
      if (op->params <= 0) continue;
      if (cur > 0 && cur + op->params > f.reduce_bucket_params) flush();
      cur += op->params;
      for (double x : models::param_tensors(*op)) held.push_back(x);
    }
  }
  if (cur > 0) flush();
  if (root > 0) out.push_back(root);
  return out;
}

}  // namespace dtsim::strategies
