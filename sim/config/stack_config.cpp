#include "sim/config/stack_config.hpp"


#include <fmt/format.h>

#include "sim/core/units.hpp"


namespace dtsim::config {

namespace {

// The keys that override the preset's memory (sim/cost/stack.cpp) one by one.
void parse_stack_memory(Reader& r, strategies::StackMemory& m) {
  using namespace strategies;
  const std::string b = r.choice("buffers", {"zero-paper", "framework"}, to_string(m.buffers));
  m.buffers = b == "framework" ? StateBuffers::Framework : StateBuffers::ZeroPaper;
  const std::string c =
      r.choice("fp8_weight_copies", {"copy-and-transpose", "none", "fp8-params"}, to_string(m.fp8_weight_copies));
  m.fp8_weight_copies = c == "none"         ? Fp8WeightCopies::None
                        : c == "fp8-params" ? Fp8WeightCopies::Fp8Params
                                            : Fp8WeightCopies::CopyAndTranspose;
  const std::string a = r.choice("allocator", {"none", "pytorch-caching", "pytorch-expandable"}, to_string(m.allocator));
  m.allocator = a == "pytorch-caching" ? Allocator::PytorchCaching
                : a == "pytorch-expandable" ? Allocator::PytorchExpandable
                                            : Allocator::None;
}

// Megatron's FP8 parameters are modelled with its distributed optimizer's gather: data and
// tensor parallel dense weights, not sharded by ZeRO-3 nor split into experts.
void refuse_fp8_params(Reader& r, const Scenario& s, const strategies::StackMemory& m) {
  if (m.fp8_weight_copies != strategies::Fp8WeightCopies::Fp8Params || !r.has("fp8_weight_copies")) return;
  const auto& p = s.parallelism;
  if (s.training.precision != strategies::Precision::Fp8)
    r.fail("fp8_weight_copies", "\"fp8-params\" keeps the weights in FP8: it needs training.precision \"fp8\"");
  if (p.zero_stage == 3 || p.expert > 1)
    r.fail("fp8_weight_copies", "\"fp8-params\" with ZeRO-3 or expert parallelism is not modelled");
}

// `grad_reduce_dtype`: Megatron-LM's gradient buffer, fp32 main gradients (the megatron-te presets'
// default) or bf16 (--grad-reduce-in-bf16); the buckets reduce it as it is held. A bucket's
// bytes mean this only with Megatron's buffers: bf16 or fp8 weights, ZeRO 0 or 1 (the
// distributed optimizer).
void parse_grad_buffer(Reader& r, Scenario& s) {
  const cost::Stack& st = s.device.stack;
  const auto& p = s.parallelism;
  const auto precision = s.training.precision;
  const bool applies = p.framework.framework == strategies::Framework::MegatronLM &&
                       (precision == strategies::Precision::Bf16 || precision == strategies::Precision::Fp8) &&
                       p.zero_stage <= 1 && st.memory.buffers == strategies::StateBuffers::Framework;
  const bool given = r.has("grad_reduce_dtype");
  const int bytes = r.choice("grad_reduce_dtype", {"fp32", "bf16"}, "fp32") == "bf16" ? 2 : 4;
  if (given && !applies)
    r.fail("grad_reduce_dtype", "is Megatron-LM's gradient buffer (--grad-reduce-in-bf16): it needs parallelism.framework "
                                "\"megatron-lm\", training.precision \"bf16\" or \"fp8\", zero_stage 0 or 1, and stack buffers "
                                "\"framework\"");
  s.parallelism.framework.grad_buffer_bytes = !applies ? 0 : given ? bytes : st.grad_buffer_bytes;
}

// `comm_sms`: SMs the stack's collectives hold (sim/cost/comm_interference.hpp). A count needs the
// device's SM count to mean anything, and must leave compute some SMs.
void parse_comm_sms(Reader& r, Scenario& s) {
  cost::Stack& st = s.device.stack;
  if (!r.has("comm_sms")) {
    r.ignore("comm_sms");
    return;
  }
  st.comm_sms = static_cast<int>(r.integer("comm_sms", 0, 100000));
  if (st.comm_sms > 0 && s.device.sm_count <= 0)
    r.fail("comm_sms", fmt::format("device \"{}\" names no sm_count, so SMs held by collectives cannot be priced",
                                   s.device.name));
  if (st.comm_sms > 0 && st.comm_sms >= s.device.sm_count)
    r.fail("comm_sms", fmt::format("{} SMs of device \"{}\"'s {} would leave none for compute", st.comm_sms, s.device.name,
                                   s.device.sm_count));
}

// `tp_overlap`: Megatron-LM asserts sequence parallelism under --tp-comm-overlap
// (megatron/training/arguments.py), and async TP decomposes the same all-gather/reduce-scatter pairs.
void parse_tp_overlap(Reader& r, Scenario& s) {
  cost::Stack& st = s.device.stack;
  st.tp_overlap = *cost::tp_overlap_from_string(
      r.choice("tp_overlap", {"none", "te-userbuffers", "async-tp"}, cost::to_string(st.tp_overlap)));
  const auto& p = s.parallelism;
  if (r.has("tp_overlap") && st.tp_overlap != taskgraph::TpOverlap::None && p.tensor > 1 && !p.sequence_parallel)
    r.fail("tp_overlap", fmt::format("\"{}\" overlaps the all-gathers and reduce-scatters of sequence parallelism: set "
                                     "parallelism.sequence_parallel to true",
                                     cost::to_string(st.tp_overlap)));
  s.parallelism.tp_overlap = st.tp_overlap;
}

// The deepspeed presets describe DeepSpeed's own ZeRO; `zero3_gathers` says which (per-parameter:
// DeepSpeed 0.3.13-0.5.10, strategies/framework.hpp).
void parse_zero3_gathers(Reader& r, Scenario& s, const std::string& preset) {
  cost::Stack& st = s.device.stack;
  const bool deepspeed = s.parallelism.framework.framework == strategies::Framework::DeepSpeed;
  if (st.needs_deepspeed && !deepspeed)
    r.fail("preset", fmt::format("\"{}\" is DeepSpeed's stack: set parallelism.framework to \"deepspeed\"", preset));
  const std::string z = r.choice("zero3_gathers", {"coalesced", "per-parameter"}, cost::to_string(st.zero3_gathers));
  st.zero3_gathers = z == "per-parameter" ? cost::Zero3Gathers::PerParameter : cost::Zero3Gathers::Coalesced;
  if (st.zero3_gathers != cost::Zero3Gathers::PerParameter) return;
  const char* key = r.has("zero3_gathers") ? "zero3_gathers" : "preset";
  if (!deepspeed) r.fail(key, "per-parameter gathers are DeepSpeed's before 0.6: set parallelism.framework to \"deepspeed\"");
  if (s.parallelism.framework.gather_per_layer)
    r.fail(key, "per-parameter gathers replace parallelism.zero3.gather \"unit\": give one");
  s.parallelism.framework.per_parameter = true;
}

// `gather_copies` (cost::GatherCopies): FSDP2's copy-out is the fsdp framework's; a preset's applies
// only there, and the key written out needs it.
void parse_gather_copies(Reader& r, Scenario& s) {
  cost::Stack& st = s.device.stack;
  st.gather_copies = r.choice("gather_copies", {"none", "copy-out"}, cost::to_string(st.gather_copies)) == "copy-out"
                         ? cost::GatherCopies::CopyOut
                         : cost::GatherCopies::None;
  const bool fsdp = s.parallelism.framework.framework == strategies::Framework::Fsdp;
  if (st.gather_copies != cost::GatherCopies::CopyOut) return;
  if (!fsdp && r.has("gather_copies"))
    r.fail("gather_copies", "\"copy-out\" is FSDP2's copy of each all-gather's output: set parallelism.framework to \"fsdp\"");
  s.parallelism.framework.gather_copy_out = fsdp;
  s.parallelism.framework.reduce_copy_in = fsdp;
}

// The stack's reduce-scatter dtype under FSDP's ZeRO-3 (cost::Stack::zero3_reduce_bytes; fsdp, or
// megatron-lm's FSDP2 in pipeline stages), unless parallelism.zero3.reduce_dtype names one.
void apply_zero3_reduce(Reader& root, Scenario& s) {
  const int bytes = s.device.stack.zero3_reduce_bytes;
  if (bytes <= 0 || s.parallelism.zero_stage != 3 || s.parallelism.framework.framework == strategies::Framework::DeepSpeed) return;
  if (auto p = root.optional_object("parallelism"))
    if (auto z = p->optional_object("zero3"); z && z->has("reduce_dtype")) return;
  s.parallelism.framework.reduce_bytes = bytes;
}

// `gemm_shapes` and `vocab_divisible_by` (sim/cost/gemm_alignment.hpp): the shapes the stack hands
// cuBLAS, and Megatron's vocabulary padding, applied here to the model before it is built: the
// padded rows are real (embedding and output-layer parameters, logits), as Megatron allocates them.
void parse_gemm_shapes(Reader& r, Scenario& s) {
  cost::Stack& st = s.device.stack;
  st.gemm_shapes = *cost::gemm_shapes_from_string(
      r.choice("gemm_shapes", {"curve", "as-written", "padded"}, cost::to_string(st.gemm_shapes)));
  st.vocab_divisible_by = r.integer("vocab_divisible_by", 0, 1 << 20, st.vocab_divisible_by);
  const auto* t = s.model.transformer();
  if (st.vocab_divisible_by <= 0 || !t || t->vocab_size <= 0) return;
  const std::int64_t multiple = st.vocab_divisible_by * s.parallelism.tensor;
  models::TransformerSpec padded = *t;
  padded.vocab_size = (t->vocab_size + multiple - 1) / multiple * multiple;
  s.model = models::ModelSpec(s.model.name, models::transformer_family(std::move(padded)));
}

// The key as written (fusion_threshold_MiB, cycle_time_ms...), for the error's pointer.
std::string written(const Reader& r, const char* base, units::Dimension d) {
  for (const auto& u : units::suffixes(d))
    if (const std::string k = std::string(base) + "_" + std::string(u.suffix); r.has(k)) return k;
  return "preset";
}

// The horovod presets' tensor fusion (strategies/tensor_fusion.hpp): `fusion_threshold` and
// `cycle_time` override Horovod's HOROVOD_FUSION_THRESHOLD and HOROVOD_CYCLE_TIME. Horovod reduces
// the data-parallel gradients of a whole model: the ready times are one stage's, and its buffers
// replace DDP's buckets, so the strategies whose gradients go elsewhere are refused.
void parse_tensor_fusion(Reader& r, Scenario& s, const std::string& preset) {
  using units::Dimension;
  auto& f = s.device.stack.fusion;
  const bool fused = f.on();
  const std::string threshold_key = written(r, "fusion_threshold", Dimension::Bytes);
  const std::string cycle_key = written(r, "cycle_time", Dimension::Time);
  f.threshold_bytes = r.quantity("fusion_threshold", Dimension::Bytes, Range{0.0, 1e13, true}, f.threshold_bytes);
  f.cycle_s = r.quantity("cycle_time", Dimension::Time, Range{0.0, 10.0, true}, f.cycle_s);
  for (const auto& key : {threshold_key, cycle_key})
    if (!fused && key != "preset")
      r.fail(key, fmt::format("tensor fusion is Horovod's, and stack \"{}\" has none: set stack.preset to \"horovod\" or "
                              "\"horovod-0.16\"", preset));
  if (!fused) return;
  const auto& p = s.parallelism;
  const char* why = p.pipeline > 1                   ? "pipeline parallelism"
                    : p.tensor > 1 || p.context > 1  ? "tensor or context parallelism"
                    : p.expert > 1                   ? "expert parallelism"
                    : p.zero_stage > 0               ? "ZeRO"
                    : p.framework.framework != strategies::Framework::MegatronLM ? "a framework other than megatron"
                    : p.priority_buckets             ? "priority buckets"
                    : p.updates != strategies::Updates::Sync ? "asynchronous updates"
                                                     : nullptr;
  if (why) r.fail("preset", fmt::format("\"{}\" all-reduces a data-parallel model's gradients in Horovod's fusion buffers: {} "
                                        "is not modelled with it", preset, why));
}

// DDP's bucket sizes mean nothing to Horovod, which fills its buffers by cycle time up to its own
// threshold: refused rather than silently ignored.
void refuse_ddp_buckets(Reader& root, const Scenario& s) {
  using units::Dimension;
  if (!s.device.stack.fusion.on()) return;
  auto p = root.optional_object("parallelism");
  if (!p) return;
  for (const char* base : {"bucket_size", "first_bucket_size"})
    if (const std::string key = written(*p, base, Dimension::Bytes); key != "preset")
      p->fail(key, fmt::format("Horovod fuses the gradients ready at each cycle into buffers of up to stack.fusion_threshold, "
                               "so DDP's {} would be ignored: set stack.fusion_threshold_MiB instead", base));
}

// RMSNorm as ops is eager PyTorch's (sim/cost/norm_kernels.cpp): compiled or fused element-wise
// kernels fuse it, so a preset's composite norm gives way to them, and the key asks for eager.
// Its memory is the model's (BuildOptions::rms_norm_ops, set from this in build_options).
void parse_norm(Reader& r, Scenario& s) {
  cost::Stack& st = s.device.stack;
  if (!r.has("norm") && st.elementwise != cost::Elementwise::Eager) st.norm = cost::NormImpl::Fused;
  const std::string norm = r.choice("norm", {"fused", "composite"}, cost::to_string(st.norm));
  st.norm = norm == "composite" ? cost::NormImpl::Composite : cost::NormImpl::Fused;
  if (!r.has("norm") || st.norm != cost::NormImpl::Composite) return;
  if (st.elementwise != cost::Elementwise::Eager)
    r.fail("norm", fmt::format("\"composite\" prices eager PyTorch's RMSNorm ops, which \"{}\" element-wise kernels fuse: set "
                               "stack.elementwise to \"eager\"", cost::to_string(st.elementwise)));
}

}  // namespace

void parse_stack(Reader& root, Scenario& s) {
  auto r = root.optional_object("stack");
  if (!r) return;
  cost::Stack& st = s.device.stack;
  const std::string preset = r->choice("preset", cost::stack_names(), "default");
  st = *cost::find_stack(preset);
  parse_stack_memory(*r, st.memory);
  refuse_fp8_params(*r, s, st.memory);
  s.training.memory = st.memory;  // the planner reads it with the rest of the training settings
  // Read with the preset's values as fallbacks, so that finish() can suggest these keys.
  st.attention = *cost::attention_impl_from_string(
      r->choice("attention", {"gemm-curve", "flash2", "flash3", "cudnn", "sdpa-math", "sdpa-flash"}, cost::to_string(st.attention)));
  if (r->has("attention") && st.attention != cost::AttentionImpl::GemmCurve && s.training.attention != models::Attention::Flash)
    r->fail("attention", fmt::format("\"{}\" prices fused attention kernels: set training.attention to \"flash\"",
                                     cost::to_string(st.attention)));
  st.elementwise = *cost::elementwise_from_string(
      r->choice("elementwise", {"fused", "eager", "compiled"}, cost::to_string(st.elementwise)));
  const std::string loss = r->choice("loss", {"fused", "eager-fp32", "compiled"}, strategies::to_string(st.memory.loss));
  st.memory.loss = loss == "eager-fp32" ? cost::Loss::EagerFp32 : loss == "compiled" ? cost::Loss::Compiled : cost::Loss::Fused;
  s.training.memory.loss = st.memory.loss;
  const std::string copies = r->choice("copies", {"fused", "eager", "eager-rotate-half"}, cost::to_string(st.copies));
  st.copies = copies == "eager" ? cost::Copies::Eager : copies == "eager-rotate-half" ? cost::Copies::RotateHalf : cost::Copies::Fused;
  if (r->has("copies") && st.copies != cost::Copies::Fused && s.training.attention != models::Attention::Flash)
    r->fail("copies", fmt::format("\"{}\" prices the copies around fused attention calls: set training.attention to \"flash\"", copies));
  parse_norm(*r, s);
  st.swiglu = r->choice("swiglu", {"chunked", "separate"}, cost::to_string(st.swiglu)) == "separate" ? cost::Swiglu::Separate
                                                                                                     : cost::Swiglu::Chunked;
  parse_grad_buffer(*r, s);
  parse_gemm_shapes(*r, s);
  parse_comm_sms(*r, s);
  parse_tp_overlap(*r, s);
  parse_zero3_gathers(*r, s, preset);
  parse_gather_copies(*r, s);
  apply_zero3_reduce(root, s);
  parse_tensor_fusion(*r, s, preset);
  refuse_ddp_buckets(root, s);
  r->finish();
}

}  // namespace dtsim::config
