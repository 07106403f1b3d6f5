#pragma once
#include <memory>
#include <string>

#include "models/model.hpp"
#include "sim/core/json_reader.hpp"

namespace dtsim::config {

// The scenario's `model` object (a preset already expanded into it), by its `kind`. `origins`
// locates values nested in lists (a CNN's layers) for errors.
models::ModelSpec parse_model(Reader r, const std::string& preset, const std::shared_ptr<const Origins>& origins);

}  // namespace dtsim::config
