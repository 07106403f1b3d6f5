#include "sim/cost/batch_norm_kernels.hpp"

#include <algorithm>

namespace dtsim::cost {

// ATen's channels-last batch norm on CUDA (aten/src/ATen/native/cuda/Normalization.cuh), as
// torch.profiler lists it on an H200 and an H100 (docs/gpu_check.md): forward, a Welford
// reduction of each channel's mean and variance over images x pixels
// (batch_norm_collect_statistics_channels_last_kernel, reads x) then the transform
// (batch_norm_transform_input_channels_last_kernel, reads x, writes y); backward, the reduction
// of dy and dy·x over the same (batch_norm_backward_reduce_channels_last_kernel, reads x and dy)
// then the input gradient (batch_norm_backward_elemt_channels_last_kernel, reads x and dy, writes
// dx). Each runs at its own measured rate: the reductions over images x pixels keep few blocks per
// channel busy and do not reach the streaming rate. The fill and inverse-deviation kernels beside
// them (about 1 us each) are left out. torch.compile generates its own kernels for batch norm:
// the model's kernel as it is.
std::vector<double> batch_norm_seconds(const DeviceProfile& d, Elementwise mode, const models::Kernel& k) {
  const bool forward = k.role == models::KernelRole::BatchNormForward;
  if (mode != Elementwise::Eager || !d.eager_batch_norm || (!forward && k.role != models::KernelRole::BatchNormBackward))
    return {};
  const auto& r = *d.eager_batch_norm;
  const double pass = k.elems * k.elem_bytes;  // one read of x
  auto at = [&](double bytes, double rate) { return std::max(bytes / rate, d.kernel_min_s); };
  if (forward) return {at(pass, r.statistics), at(2 * pass, r.transform)};
  return {at(2 * pass, r.backward_reduce), at(3 * pass, r.backward_input)};
}

}  // namespace dtsim::cost
