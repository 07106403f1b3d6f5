#pragma once
// Scenarios that extend the shared valid base, for tests that load or simulate them.
#include <string>

#include "helpers.hpp"
#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "sim/results/result.hpp"

namespace dtsim::test {

// `json` extends "base.json", written beside it as kValidScenario.
inline results::Result simulate_over_base(const std::string& json) {
  TempDir dir;
  dir.file("base.json", kValidScenario);
  return results::simulate(config::load_scenario(dir.file("s.json", json)));
}

// The input error `json` gives, as "pointer: reason"; empty when it loads.
inline std::string input_error_over_base(const std::string& json) {
  TempDir dir;
  dir.file("base.json", kValidScenario);
  try {
    config::load_scenario(dir.file("s.json", json));
  } catch (const InputError& e) {
    return e.pointer() + ": " + e.reason();
  }
  return "";
}

}  // namespace dtsim::test
