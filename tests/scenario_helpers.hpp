#pragma once
// Scenarios that extend the shared valid base, for tests that load or simulate them.
#include <string>

#include <gtest/gtest.h>

#include "helpers.hpp"
#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "sim/results/result.hpp"

namespace dtsim::test {

// What every result shows: a positive step whose breakdown parts are each >= 0 and sum to it.
inline void expect_parts_sum_to_step(const results::Result& r) {
  const auto& b = r.breakdown;
  EXPECT_GT(r.step_time_s, 0.0);
  for (double part : {b.compute, b.exposed_communication, b.pipeline_bubble, b.stage_imbalance, b.optimizer, b.straggler_wait,
                      b.input_stall})
    EXPECT_GE(part, 0.0);
  EXPECT_NEAR(b.total(), r.step_time_s, 1e-6 * r.step_time_s);
}

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
