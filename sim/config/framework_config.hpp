#pragma once
#include "sim/config/scenario.hpp"
#include "sim/core/json_reader.hpp"

namespace dtsim::config {

// The `parallelism` keys that say how the framework runs (strategies/framework.hpp):
// `framework` sets every default together, `zero3` overrides ZeRO-3/FSDP knobs one by one,
// `pipeline_grad_reduce` and `pipeline_reduce_dtype` the pipeline engine's reduction, and
// `activation_offload` / `activation_offload_copies` the activations' trips to host memory.
// Runs inside parse_parallelism, after zero_stage and pipeline are known.
void parse_framework(Reader& r, Scenario& s);

}  // namespace dtsim::config
