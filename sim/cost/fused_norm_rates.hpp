#pragma once
// ATen's fused LayerNorm and RMSNorm CUDA kernels, and torch.compile's, each at the share of the
// HBM bandwidth it was measured to reach: the stack's rate for a norm run as one kernel each way.
#include <vector>

#include "models/model_graph.hpp"
#include "sim/cost/roofline.hpp"

namespace dtsim::cost {

// GPU seconds of each ATen kernel for the model's norm kernel `k` (Norm or RmsNorm roles): forward
// one, backward the input gradient and the weight (and bias) gradient; never faster than the
// device's memory-bound curve. Empty where `k` is no norm or the device is no GPU (no sm_count).
std::vector<double> fused_norm_seconds(const DeviceProfile& d, const models::Kernel& k, const std::string& dtype);

// The same for torch.compile's norm kernels (Inductor), by row length (`k.n`, the hidden size): the
// model's fused kernel and, backward, the weight gradient's sum over tokens.
std::vector<double> compiled_norm_seconds(const DeviceProfile& d, const models::Kernel& k, const std::string& dtype);

}  // namespace dtsim::cost
