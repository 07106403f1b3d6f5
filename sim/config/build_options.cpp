#include "sim/config/build_options.hpp"

namespace dtsim::config {

models::BuildOptions build_options(const Scenario& s) {
  const auto& p = s.parallelism;
  models::BuildOptions o{p.micro_batch, strategies::activation_bytes(s.training.precision), s.training.attention, p.tensor,
                         p.sequence_parallel};
  o.fp8 = s.training.precision == strategies::Precision::Fp8;
  o.fp8_scaling = s.training.fp8_scaling;
  o.context = p.context;
  o.context_balanced = p.context_load_balance;
  o.expert = p.expert;
  o.expert_tensor = p.expert_tensor;
  o.rms_norm_ops = s.device.stack.norm == cost::NormImpl::Composite;
  // Only selective recomputation reads the flags the modules set: the other kinds build alike.
  o.recompute_modules = p.recompute_modules;
  return o;
}

models::BuildOptions whole_model_options(const Scenario& s) {
  models::BuildOptions o = build_options(s);
  o.tensor = 1;
  o.sequence_parallel = false;
  o.context = 1;
  o.expert = 1;
  o.expert_tensor = 0;
  return o;
}

}  // namespace dtsim::config
