#pragma once
// How a scenario instantiates its model's op graph: the one place that reads the model build
// options out of a scenario, so that simulate, the closed form and the fewest-GPUs search build
// the same graph for the same scenario.
#include "models/model_graph.hpp"
#include "sim/config/scenario.hpp"

namespace dtsim::config {

// One GPU's slice of the model (tensor, sequence, context and expert parallelism) at the
// scenario's micro-batch, activation precision, attention and FP8 recipe.
models::BuildOptions build_options(const Scenario& s);

// The whole model, unsplit: what parameter counts are taken from.
models::BuildOptions whole_model_options(const Scenario& s);

}  // namespace dtsim::config
