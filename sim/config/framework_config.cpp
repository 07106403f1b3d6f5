#include "sim/config/framework_config.hpp"

#include <fmt/format.h>

#include <string>
#include <utility>

namespace dtsim::config {

namespace {
int dtype_bytes(const std::string& d) { return d == "fp32" ? 4 : d == "grad" ? 0 : 2; }

// DeepSpeed's engine reduces ZeRO-0 and ZeRO-1 gradients once the backward is done
// (runtime/engine.py allreduce_gradients at the accumulation boundary: buffered_allreduce_fallback,
// or the ZeRO-1 optimizer's reduce_gradients); only ZeRO-2's hooks reduce during the backward.
void reduce_after_backward(Reader& r, strategies::ParallelismSpec& p) {
  if (p.zero_stage > 1) return;
  if (r.has("overlap_grad_reduce") && p.overlap_grad_reduce)
    r.fail("overlap_grad_reduce", "DeepSpeed reduces the gradients after the backward without ZeRO or with ZeRO-1 "
                                  "(engine.py allreduce_gradients): give false, or framework \"megatron-lm\"");
  p.overlap_grad_reduce = false;
}

// parallelism.zero3: DeepSpeed's and FSDP's ZeRO-3 knobs, each under dtsim's name.
void parse_zero3(Reader& z, strategies::ParallelismSpec& p, strategies::Framework fw) {
  using strategies::Framework;
  auto& f = p.framework;
  if (p.zero_stage != 3) z.fail_here("ZeRO-3 knobs need zero_stage 3 (or fsdp)");
  if (fw == Framework::MegatronLM)
    z.fail_here("ZeRO-3 knobs describe DeepSpeed's or FSDP's ZeRO-3: give parallelism.framework \"deepspeed\" or \"fsdp\"");
  // DeepSpeed's own config names, pointed to the knob that models each.
  static const std::pair<const char*, const char*> deepspeed_names[] = {
      {"stage3_prefetch_bucket_size", "prefetch_bucket_params"},
      {"stage3_param_persistence_threshold", "persistence_threshold_params"},
      {"stage3_max_reuse_distance", "max_reuse_distance_params"},
      {"reduce_bucket_size", "reduce_bucket_params"},
      {"communication_data_type", "reduce_dtype"},
      {"stage3_max_live_parameters", "max_live_params"}};
  for (const auto& [theirs, ours] : deepspeed_names)
    if (z.has(theirs)) z.fail(theirs, std::string("is ") + ours + " in dtsim");
  if (z.has("gather")) f.gather_per_layer = z.choice("gather", {"sub-module", "unit"}) == "unit";
  const Range elements{0.0, 1e15};
  f.prefetch_bucket_params = z.number("prefetch_bucket_params", elements, f.prefetch_bucket_params);
  f.persistence_threshold_params = z.number("persistence_threshold_params", elements, f.persistence_threshold_params);
  f.max_reuse_distance_params = z.number("max_reuse_distance_params", elements, f.max_reuse_distance_params);
  if (z.has("max_live_params")) {
    if (fw != Framework::DeepSpeed) z.fail("max_live_params", "is DeepSpeed's stage3_max_live_parameters: give framework \"deepspeed\"");
    f.max_live_params = z.number("max_live_params", Range{0.0, 1e15, true}, f.max_live_params);
  }
  f.forward_prefetch_depth = static_cast<int>(z.integer("forward_prefetch_depth", -1, 1000, f.forward_prefetch_depth));
  f.backward_prefetch_depth = static_cast<int>(z.integer("backward_prefetch_depth", -1, 1000, f.backward_prefetch_depth));
  // FSDP's own names for the same: BACKWARD_PRE issues the next unit's gather before this
  // unit's gradients (one ahead); BACKWARD_POST after them and None at the unit's own hook
  // (none ahead). limit_all_gathers caps gathers in flight at two (one ahead); without it the
  // CPU issues them as fast as it runs ahead (any number).
  if (z.has("backward_prefetch")) {
    if (z.has("backward_prefetch_depth")) z.fail("backward_prefetch", "says what backward_prefetch_depth says: give one");
    f.backward_prefetch_depth = z.choice("backward_prefetch", {"backward_pre", "backward_post", "none"}) == "backward_pre" ? 1 : 0;
  }
  if (z.has("limit_all_gathers")) {
    if (z.has("forward_prefetch_depth")) z.fail("limit_all_gathers", "says what forward_prefetch_depth says: give one");
    f.forward_prefetch_depth = z.boolean("limit_all_gathers", true) ? 1 : -1;
  }
  if (z.has("fp8_all_gather")) {
    if (fw != Framework::Fsdp) z.fail("fp8_all_gather", "is FSDP2's float8 all-gather (torchao's): give framework \"fsdp\"");
    if (p.expert > 1) z.fail("fp8_all_gather", "the float8 all-gather with expert parallelism is not modelled");
    f.fp8_all_gather = z.boolean("fp8_all_gather", false);
  }
  f.regather_for_recompute = z.boolean("regather_for_recompute", f.regather_for_recompute);
  f.root_kept_gathered = z.boolean("root_kept_gathered", f.root_kept_gathered);
  f.reduce_bucket_params = z.number("reduce_bucket_params", elements, f.reduce_bucket_params);
  if (z.has("reduce_dtype")) f.reduce_bytes = dtype_bytes(z.choice("reduce_dtype", {"grad", "fp32", "bf16", "fp16"}));
  f.sync_after_backward = z.boolean("sync_after_backward", f.sync_after_backward);
  f.collective_launch_s = z.quantity("collective_launch", units::Dimension::Time, Range{0.0, 1.0}, f.collective_launch_s);
  z.finish();
}

}  // namespace

void parse_framework(Reader& r, Scenario& s) {
  auto& p = s.parallelism;
  using strategies::Framework;
  const std::string name = r.choice("framework", {"megatron-lm", "deepspeed", "fsdp"}, "megatron-lm");
  const Framework fw = name == "deepspeed" ? Framework::DeepSpeed : name == "fsdp" ? Framework::Fsdp : Framework::MegatronLM;
  p.framework = strategies::framework_defaults(fw);
  auto& f = p.framework;
  // The framework's gathers follow one chunk per stage; virtual stages would interleave two.
  if (fw != Framework::MegatronLM && p.zero_stage == 3 && p.virtual_stages > 1)
    r.fail("framework", fmt::format("{}'s ZeRO-3 with virtual stages (interleaved-1f1b) is not modelled", name));
  // ZeRO-3 inside pipeline stages is modelled as torchtitan runs FSDP2 there (strategies/units/zero.cpp).
  if (fw == Framework::DeepSpeed && p.zero_stage == 3 && p.pipeline > 1)
    r.fail("framework", "DeepSpeed's pipeline engine refuses ZeRO-3 (deepspeed/runtime/pipe/engine.py: \"ZeRO-2 and ZeRO-3 are "
                        "incompatible with pipeline parallelism\"): give zero_stage 1, or framework \"megatron-lm\"");
  if (fw == Framework::Fsdp && p.zero_stage == 3 && p.pipeline > 1)
    r.fail("framework", "fsdp's per-unit gathers inside pipeline stages are not modelled: framework \"megatron-lm\" models "
                        "FSDP2 in each stage as torchtitan runs it (gathered once per step, reduce-scattered after the last backward)");
  if (fw == Framework::DeepSpeed) reduce_after_backward(r, p);
  if (auto z = r.optional_object("zero3")) parse_zero3(*z, p, fw);
  if (r.has("pipeline_grad_reduce")) {
    if (p.pipeline < 2) r.fail("pipeline_grad_reduce", "needs pipeline parallelism (pipeline of 2 or more)");
    f.pipeline_reduce_after_flush = r.choice("pipeline_grad_reduce", {"overlapped", "after-flush"}) == "after-flush";
  }
  if (r.has("pipeline_reduce_dtype")) {
    if (!f.pipeline_reduce_after_flush) r.fail("pipeline_reduce_dtype", "applies to \"pipeline_grad_reduce\": \"after-flush\"");
    f.pipeline_reduce_bytes = dtype_bytes(r.choice("pipeline_reduce_dtype", {"grad", "fp32", "bf16", "fp16"}));
  }
  p.activation_offload = r.boolean("activation_offload", false);
  if (p.activation_offload && p.recompute == strategies::Recompute::Stage)
    r.fail("activation_offload", "offloading a stage-recomputed chunk's one checkpoint is not modelled: use recompute \"full\"");
  if (r.has("activation_offload_copies")) {
    if (!p.activation_offload) r.fail("activation_offload_copies", "applies with \"activation_offload\": true");
    f.activation_offload_overlapped = r.choice("activation_offload_copies", {"overlapped", "blocking"}) == "overlapped";
  }
}

}  // namespace dtsim::config
