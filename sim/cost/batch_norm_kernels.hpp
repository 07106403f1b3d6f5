#pragma once
// The kernels eager PyTorch runs for a training-mode batch norm: the stack's batch-norm mechanism.
#include <vector>

#include "models/model_graph.hpp"
#include "sim/cost/roofline.hpp"

namespace dtsim::cost {

// GPU seconds of each kernel eager PyTorch launches for the model's batch norm kernel `k` (a
// BatchNormForward or BatchNormBackward role) on a device whose profile measured them
// (`eager_batch_norm`); empty: the model's kernel as it is.
std::vector<double> batch_norm_seconds(const DeviceProfile& d, Elementwise mode, const models::Kernel& k);

}  // namespace dtsim::cost
