#include "sim/config/tensor_fusion_inputs.hpp"

#include "sim/config/build_options.hpp"
#include "sim/cost/roofline.hpp"
#include "strategies/works.hpp"

namespace dtsim::config {

namespace {
// A copy reads and writes each byte: a memory-bound kernel of twice the bytes, priced as the cost
// model prices every memory-bound kernel (sim/cost/roofline.cpp). Quoted at 1 GiB, where the
// kernel's fixed cost is negligible; Horovod's copies are of MiBs (one per tensor before v0.19,
// batched into one kernel after: ops/cuda/cuda_kernels.cu BatchedD2DMemcpy).
double copy_seconds_per_byte(const Scenario& s) {
  constexpr double kBytes = 1024.0 * 1024 * 1024;
  models::Kernel copy;
  copy.name = "fusion buffer copy";
  copy.kind = models::KernelKind::Memory;
  copy.bytes = 2 * kBytes;
  return cost::quote_kernel(s.device, copy, compute_dtype(s.training.precision)).seconds / kBytes;
}
}  // namespace

void price_tensor_fusion(Scenario& s) {
  auto& f = s.parallelism.fusion;
  f = s.device.stack.fusion;
  if (!f.on()) return;
  const models::ModelGraph g = s.model.build(build_options(s));
  const std::string dtype = compute_dtype(s.training.precision);
  // One stage (the loader refuses pipelines), so the stage's layers are the model's, in order; a
  // layer's gradients are ready when its backward ends, the layers after it having run first.
  f.ready_s.assign(g.layers.size(), 0.0);
  double at = 0;
  for (std::size_t i = g.layers.size(); i-- > 0;) {
    const auto w = strategies::backward_work({&g.layers[i]}, g, s.parallelism, 0);
    double seconds = 0;
    for (const auto& k : w.kernels) seconds += cost::quote_kernel(s.device, k, dtype).seconds;
    at += seconds * w.repeat;
    f.ready_s[i] = at;
  }
  f.copy_s_per_byte = copy_seconds_per_byte(s);
}

}  // namespace dtsim::config
