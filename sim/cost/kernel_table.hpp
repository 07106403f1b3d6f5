#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/model_graph.hpp"

namespace dtsim::cost {

enum class PriceSource { Exact, Interpolated, Roofline };
const char* to_string(PriceSource s);

// Kernel times measured on one device (`dtsim profile`): GEMMs and convolutions by (implicit)
// GEMM shape, element-wise kernels by bytes moved.
struct KernelTable {
  struct Gemm {
    std::int64_t batch = 1, m = 0, n = 0, k = 0;
    double seconds = 0;
  };
  struct Memory {
    double bytes = 0, seconds = 0;
  };
  nlohmann::json provenance;  // device, CPU or GPU model, threads, compiler, libraries, date
  std::string dtype = "fp32";
  std::vector<Gemm> gemms;
  std::vector<Gemm> convs;  // convolutions by implicit-GEMM shape (batch = groups)
  std::vector<Memory> memory;

  // Exact shape, else interpolation along the measured rate-vs-size curve (inside the measured
  // range), else nothing: the caller falls back to the roofline.
  std::optional<std::pair<double, PriceSource>> price(const models::Kernel& k) const;

  nlohmann::json to_json() const;
  static KernelTable from_json(const nlohmann::json& j, const std::string& file);  // InputError on bad input
};

}  // namespace dtsim::cost
