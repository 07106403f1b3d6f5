#include "strategies/spec.hpp"
#include "strategies/settings.hpp"
#include "strategies/units/units.hpp"

#include <algorithm>

namespace dtsim::strategies {

double weight_bytes_per_param(Precision p) { return mixed_precision(p) ? 2.0 : p == Precision::Fp64 ? 8.0 : 4.0; }
double grad_bytes_per_param(Precision p) { return weight_bytes_per_param(p); }
bool pipeline_reduce_after_flush(const ParallelismSpec& p) {
  return p.framework.pipeline_reduce_after_flush && p.pipeline > 1 && p.updates == Updates::Sync;
}
int held_grad_buffer_bytes(const FrameworkSpec& f, int zero_stage) { return zero_stage <= 1 ? f.grad_buffer_bytes : 0; }
double wire_grad_bytes(const ParallelismSpec& p, Precision t) {
  if (bf16_optimizer(p, t)) return 4.0;  // its fp32 gradient buffer, all-reduced whole
  const int held = held_grad_buffer_bytes(p.framework, p.zero_stage);
  return held > 0 ? held : grad_bytes_per_param(t);
}
// After the flush too the wire carries BF16_Optimizer's fp32 buffer ("hardcoded for fp32 gradient
// accumulation") or else the gradients' own dtype (today's ZeRO-1 optimizer reduces bf16 ones:
// grad_accum_dtype defaults to the model's under ZeRO, runtime/engine.py get_data_types), unless
// the pipeline's reduction names its own.
double reduced_grad_bytes(const ParallelismSpec& p, Precision t) {
  if (pipeline_reduce_after_flush(p) && p.framework.pipeline_reduce_bytes > 0) return p.framework.pipeline_reduce_bytes;
  return wire_grad_bytes(p, t);
}
const char* priority_order_refusal(const ParallelismSpec& p) {
  if (p.data < 2) return "priority order needs data parallelism (data of 2 or more)";
  if (p.tensor > 1 || p.pipeline > 1 || p.zero_stage > 0 || p.updates != Updates::Sync)
    return "priority order is modelled for synchronous data parallelism (tensor 1, pipeline 1, zero_stage 0)";
  if (!p.overlap_grad_reduce) return "priority order needs overlap_grad_reduce";
  if (p.offload_optimizer) return "priority order with the optimizer on the host is not modelled";
  return nullptr;
}
double optimizer_bytes_per_param(Precision p, models::OptimizerKind o) {
  if (p == Precision::Fp64) return o == models::OptimizerKind::Adam ? 16.0 : 8.0;  // (m, v) or momentum in fp64
  double states = o == models::OptimizerKind::Adam ? 8.0 : 4.0;  // (m, v) or momentum, fp32
  return states + (mixed_precision(p) ? 4.0 : 0.0);               // fp32 master weights
}

double InputPipeline::seconds(std::int64_t micro_batch) const {
  if (!enabled) return 0;
  const double b = static_cast<double>(micro_batch);
  const double cpu = b * cpu_seconds_per_sample / std::max(1, workers_per_gpu);
  const double io = storage_bandwidth_per_gpu > 0 ? b * sample_bytes / storage_bandwidth_per_gpu : 0.0;
  return std::max(cpu, io);
}

const char* to_string(Precision p) {
  switch (p) {
    case Precision::Fp64: return "fp64";
    case Precision::Fp32: return "fp32";
    case Precision::Tf32: return "tf32";
    case Precision::Bf16: return "bf16";
    case Precision::Fp16: return "fp16";
    case Precision::Fp8: return "fp8";
  }
  return "?";
}

const char* to_string(models::Fp8Scaling s) {
  switch (s) {
    case models::Fp8Scaling::Delayed: return "delayed";
    case models::Fp8Scaling::Current: return "current";
    case models::Fp8Scaling::Blockwise: return "blockwise";
    case models::Fp8Scaling::Mx: return "mxfp8";
  }
  return "?";
}

std::string precision_text(const TrainingSpec& t) {
  if (t.precision != Precision::Fp8) return to_string(t.precision);
  return std::string("fp8, ") + to_string(t.fp8_scaling) + " scaling";
}

const char* to_string(Compression c) {
  switch (c) {
    case Compression::None: return "none";
    case Compression::Fp16: return "fp16";
    case Compression::Int8: return "int8";
    case Compression::TopK: return "topk";
  }
  return "?";
}

const char* to_string(Recompute r) {
  switch (r) {
    case Recompute::None: return "none";
    case Recompute::Selective: return "selective";
    case Recompute::Full: return "full";
    case Recompute::Stage: return "stage";
    case Recompute::Op: return "op";
  }
  return "?";
}

namespace {
struct NamedModule {
  const char* name;
  std::uint8_t bit;
};
constexpr NamedModule kModules[] = {{"core_attn", models::recompute_module::kCoreAttn},
                                    {"layernorm", models::recompute_module::kLayernorm},
                                    {"moe_act", models::recompute_module::kMoeAct},
                                    {"mlp", models::recompute_module::kMlp},
                                    {"moe", models::recompute_module::kMoe},
                                    {"shared_experts", models::recompute_module::kSharedExperts},
                                    {"mla_up_proj", models::recompute_module::kMlaUpProj}};
}  // namespace

std::vector<std::string> recompute_module_names() {
  std::vector<std::string> out;
  for (const auto& m : kModules) out.emplace_back(m.name);
  return out;
}

std::uint8_t recompute_module_bit(const std::string& name) {
  for (const auto& m : kModules)
    if (name == m.name) return m.bit;
  return 0;
}

std::vector<std::string> recompute_module_list(std::uint8_t modules) {
  std::vector<std::string> out;
  for (const auto& m : kModules)
    if (modules & m.bit) out.emplace_back(m.name);
  return out;
}

const char* to_string(Updates u) {
  switch (u) {
    case Updates::Sync: return "sync";
    case Updates::Async: return "async";
    case Updates::Hogwild: return "hogwild";
    case Updates::Easgd: return "easgd";
  }
  return "?";
}

}  // namespace dtsim::strategies
