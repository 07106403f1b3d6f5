#pragma once
// This project's own kernel timings on an H200 (scripts/gpu_microbench.py, 2026-11-28;
// docs/gpu_check/h200-2026-11-28/microbench.json) and the device they were timed on, for the tests
// that hold dtsim's kernel costs against them (test_h200_microbench.cpp, test_h200_attention.cpp).
#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/config/scenario.hpp"
#include "sim/cost/roofline.hpp"

namespace dtsim::test {

inline const nlohmann::json& measured() {
  static const nlohmann::json j = [] {
    std::ifstream f(std::string(DTSIM_SOURCE_DIR) + "/docs/gpu_check/h200-2026-11-28/microbench.json");
    return nlohmann::json::parse(f);
  }();
  return j;
}

inline const cost::DeviceProfile& h200() {
  static const auto d = config::load_device_profile("h200-sxm-141gb");
  return d;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace dtsim::test
