#include "sim/config/stack_config.hpp"

#include <fmt/format.h>

#include "sim/cost/stack_memory.hpp"

namespace dtsim::config {

namespace {

// The preset's memory (sim/cost/stack_memory.cpp), then the keys that override it one by one.
void parse_stack_memory(Reader& r, const std::string& preset, strategies::StackMemory& m) {
  using namespace strategies;
  m = cost::stack_memory(preset);
  const std::string b = r.choice("buffers", {"zero-paper", "framework"}, to_string(m.buffers));
  m.buffers = b == "framework" ? StateBuffers::Framework : StateBuffers::ZeroPaper;
  const std::string c = r.choice("fp8_weight_copies", {"copy-and-transpose", "none"}, to_string(m.fp8_weight_copies));
  m.fp8_weight_copies = c == "none" ? Fp8WeightCopies::None : Fp8WeightCopies::CopyAndTranspose;
  const std::string a = r.choice("allocator", {"none", "pytorch-caching", "pytorch-expandable"}, to_string(m.allocator));
  m.allocator = a == "pytorch-caching" ? Allocator::PytorchCaching
                : a == "pytorch-expandable" ? Allocator::PytorchExpandable
                                            : Allocator::None;
}

}  // namespace

void parse_stack(Reader& root, Scenario& s) {
  auto r = root.optional_object("stack");
  if (!r) return;
  cost::Stack& st = s.device.stack;
  const std::string preset = r->choice("preset", cost::stack_names(), "default");
  st = *cost::find_stack(preset);
  parse_stack_memory(*r, preset, s.training.memory);
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
