#pragma once
#include <string>

#include "models/model.hpp"
#include "sim/core/json_reader.hpp"

namespace dtsim::config {

// The scenario's `model` object (a preset already expanded into it), by its `kind`.
models::ModelSpec parse_model(Reader r, const std::string& preset);

}  // namespace dtsim::config
