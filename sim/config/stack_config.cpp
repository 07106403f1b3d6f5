#include "sim/config/stack_config.hpp"

#include <fmt/format.h>

namespace dtsim::config {

void parse_stack(Reader& root, Scenario& s) {
  auto r = root.optional_object("stack");
  if (!r) return;
  cost::Stack& st = s.device.stack;
  st = *cost::find_stack(r->choice("preset", cost::stack_names(), "default"));
  // Read with the preset's values as fallbacks, so that finish() can suggest these keys.
  st.attention = *cost::attention_impl_from_string(
      r->choice("attention", {"gemm-curve", "flash2", "flash3", "cudnn", "sdpa-math"}, cost::to_string(st.attention)));
  if (r->has("attention") && st.attention != cost::AttentionImpl::GemmCurve && s.training.attention != models::Attention::Flash)
    r->fail("attention", fmt::format("\"{}\" prices fused attention kernels: set training.attention to \"flash\"",
                                     cost::to_string(st.attention)));
  st.elementwise = *cost::elementwise_from_string(
      r->choice("elementwise", {"fused", "eager", "compiled"}, cost::to_string(st.elementwise)));
  r->finish();
}

}  // namespace dtsim::config
