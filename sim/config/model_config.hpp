#pragma once
#include <memory>
#include <string>

#include "models/model.hpp"
#include "sim/core/json_reader.hpp"

namespace dtsim::config {

// The scenario's `model` object (a preset already expanded into it), read by the family its
// `kind` names (models/families.cpp). `origins` locates values nested in lists for errors.
models::ModelSpec parse_model(Reader r, const std::string& preset, const std::shared_ptr<const Origins>& origins);

}  // namespace dtsim::config
