#pragma once
// How the training framework runs ZeRO-3/FSDP, its pipeline engine and offload: the mechanisms
// that make a DeepSpeed or FSDP run slower than the idealised schedule, each a knob whose
// default is the framework's own (sources in framework.cpp).
#include <string>
#include <vector>

#include "models/model_graph.hpp"

namespace dtsim::strategies {

// megatron-lm keeps dtsim's idealised ZeRO-3 (one gather per layer, any number in flight) and
// Megatron's pipeline (gradient reduction overlapped with the last backward).
enum class Framework { MegatronLM, DeepSpeed, Fsdp };

struct FrameworkSpec {
  Framework framework = Framework::MegatronLM;
  // --- ZeRO-3 / FSDP parameter gathering
  // Gather unit: DeepSpeed fetches per sub-module and coalesces the next sub-modules' parameters
  // into one all-gather until it holds prefetch_bucket_params elements; FSDP gathers one wrap
  // unit (a transformer block; embedding and head form the root unit) at a time.
  bool gather_per_layer = false;
  double prefetch_bucket_params = 5e7;
  // Sub-module parameters below this many elements are never partitioned (no gather).
  double persistence_threshold_params = 1e5;
  // A gathered sub-module stays gathered when it is used again within this many elements of
  // other sub-modules' parameters (stage3_max_reuse_distance).
  double max_reuse_distance_params = 1e9;
  // Gathers in flight ahead of the one the compute waits for: gather k may start once the
  // compute that used gather k - depth - 1 has ended. Negative: any number (bounded by the
  // communication stream only).
  int forward_prefetch_depth = 1, backward_prefetch_depth = 1;
  // DeepSpeed's stage3_max_live_parameters: prefetching stops while this many elements are
  // gathered (fetch_sub_module prefetches at most min(max_live - live, prefetch bucket)), which
  // bounds the gathered parameters a GPU holds. 0: no bound (FSDP, megatron-lm).
  double max_live_params = 0;
  // The recompute forward inside backward runs the gather hooks again (DeepSpeed); FSDP's
  // pre-backward unshard covers the recompute of a checkpointed block inside its unit.
  bool regather_for_recompute = true;
  // FSDP keeps the root unit (embedding, final norm, head) gathered from forward to backward.
  bool root_kept_gathered = false;
  // --- gradient reduce-scatter
  // Elements per reduce-scatter bucket (DeepSpeed reduce_bucket_size); 0: one per gather unit
  // right after its backward (FSDP's post-backward hook).
  double reduce_bucket_params = 5e8;
  int reduce_bytes = 0;  // bytes per gradient element on the wire; 0: the gradient's own dtype
  // --- data-parallel gradient buffer (Megatron-LM's DDP and distributed optimizer, ZeRO 0-1)
  // Bytes per element of the gradient buffer its buckets reduce from: 4 for Megatron's fp32 main
  // gradients (bf16 training, megatron/training/arguments.py accumulate_allreduce_grads_in_fp32),
  // 2 under --grad-reduce-in-bf16; 0: the gradient's own dtype (dtsim's behaviour without a stack).
  int grad_buffer_bytes = 0;
  // The host waits for the reduce stream at the end of every micro-batch's backward
  // (DeepSpeed's independent_gradient_partition_epilogue, FSDP's post-backward final callback).
  bool sync_after_backward = true;
  // DeepSpeed 0.3.13-0.5.10's ZeRO-3 (stage3.py, partition_parameters.py before 0.6.0): one
  // all-gather per parameter tensor, each after torch.cuda.synchronize(), and one reduce-scatter per
  // parameter tensor when a bucket is reduced. The prefetch still groups the next tensors into
  // bursts of prefetch_bucket_params elements; the compute of the sub-module that issues a burst
  // waits for all of its tensors but the last (the host is blocked in the synchronisations), so
  // only that one overlaps compute. Persistence is judged per tensor.
  bool per_parameter = false;
  // FSDP2 copies each all-gather's output into the unit's unsharded parameters on the compute
  // stream before the unit's forward or backward runs (a stack sets it: cost::Stack::gather_copies).
  bool gather_copy_out = false;
  // torchao's float8 all-gather under FSDP2 (torchtitan's float8.enable_fsdp_float8_all_gather):
  // each FP8 GEMM weight is cast from its fp32 shard to FP8 before the all-gather, which then
  // carries, and the copy-out copies, one byte per such weight.
  bool fp8_all_gather = false;
  // FSDP2's foreach_reduce copies a unit's gradients into the reduce-scatter's input (cast to the
  // reduce dtype) on the compute stream before the reduce-scatter is issued; set with gather_copy_out.
  bool reduce_copy_in = false;
  // Fixed host-side cost of issuing one collective (framework bookkeeping and the kernel
  // launch), added to each ZeRO-3 collective's time.
  double collective_launch_s = 0;
  // --- pipeline engine
  // Data-parallel gradients reduced after the last micro-batch's backward, no overlap
  // (DeepSpeed's TrainSchedule: ReduceTiedGrads, ReduceGrads, OptimizerStep).
  bool pipeline_reduce_after_flush = false;
  int pipeline_reduce_bytes = 0;                 // 0: the gradient's dtype
  double pipeline_reduce_bucket_params = 5e8;    // buffered_allreduce_fallback's elements per buffer
  // --- activation offload: copies overlapped on their own stream (Megatron-Core) or on the
  // compute stream (DeepSpeed cpu_checkpointing, torch save_on_cpu).
  bool activation_offload_overlapped = true;
};

FrameworkSpec framework_defaults(Framework f);
const char* to_string(Framework f);

// One ZeRO-3 gather: the elements it brings in and the layers whose sub-modules use them.
struct Gather {
  double params = 0;
  int layer = 0;         // index into the stage's layers of the first sub-module it serves
  bool backward = false; // issued in the backward half of the micro-batch
  int use = 0;           // index of the first use (into the micro-batch's use trace) it serves
  // per_parameter: the prefetch burst it belongs to (gathers of one burst are issued together);
  // otherwise its own index.
  int burst = 0;
};

class Checkpoints;  // strategies/recompute.hpp

// A micro-batch's parameter uses in order: each sub-module (op with parameters) of each layer
// in forward order, then backward layer by layer, the recompute forward first where `ck` re-runs
// a block whole. At layer granularity (FSDP) one use per layer and direction.
struct ParamUse {
  int layer = 0;
  int op = -1;  // -1: the whole layer (FSDP unit)
  double params = 0;
  bool backward = false;
};
std::vector<ParamUse> param_uses(const std::vector<const models::Layer*>& layers, const FrameworkSpec& f, const Checkpoints& ck);

// The all-gathers one micro-batch issues on one rank, in order, following the framework's
// rules: persistent parameters skipped, parameters kept between uses within the reuse distance
// (or FSDP's root unit), and DeepSpeed's coalescing of the next uses up to the prefetch bucket.
// `wait`, when given, receives per use (param_uses order) the gather it waits for, -1 for none.
std::vector<Gather> zero3_gathers(const std::vector<const models::Layer*>& layers, const FrameworkSpec& f, const Checkpoints& ck,
                                  std::vector<int>* wait = nullptr);

// The most parameter elements gathered on one GPU at once in a micro-batch: at each use, those
// kept gathered (the reuse distance, FSDP's root) plus what the coordinator prefetches then:
// the next parameters not yet gathered, added one by one while fewer than
// min(max_live_params - gathered, prefetch_bucket_params) are in flight (DeepSpeed's
// fetch_sub_module; FSDP and megatron-lm: the next gather unit), none with prefetch depth 0.
double zero3_gathered_peak(const std::vector<const models::Layer*>& layers, const FrameworkSpec& f, const Checkpoints& ck);

// Elements the reduce-scatters of one micro-batch carry, bucket by bucket in backward order.
// With `reduce_bucket_params` 0, one per layer.
std::vector<double> zero3_reduce_buckets(const std::vector<const models::Layer*>& layers, const FrameworkSpec& f);

}  // namespace dtsim::strategies
