#pragma once
// One model kernel of an element-wise role and what a stack quotes for its forward and backward
// pair, for the tests of the eager ops mechanisms (norm_kernels, swiglu_kernels).
#include <utility>

#include "models/model_graph.hpp"
#include "sim/cost/roofline.hpp"

namespace dtsim::test {

// bf16, over `elems` elements; `bytes_per_elem`: what the model's own kernel moves.
inline models::Kernel role_kernel(models::KernelRole role, double elems, double bytes_per_elem) {
  models::Kernel k;
  k.kind = models::KernelKind::Memory;
  k.role = role;
  k.elems = elems;
  k.elem_bytes = 2;
  k.bytes = bytes_per_elem * elems;
  return k;
}

// The stack's quotes for a forward kernel and its backward over `elems` elements.
inline std::pair<double, double> quoted_pair(const cost::DeviceProfile& d, models::KernelRole forward, double forward_bytes,
                                             models::KernelRole backward, double backward_bytes, double elems) {
  return {cost::quote_kernel(d, role_kernel(forward, elems, forward_bytes), "bf16").seconds,
          cost::quote_kernel(d, role_kernel(backward, elems, backward_bytes), "bf16").seconds};
}

}  // namespace dtsim::test
