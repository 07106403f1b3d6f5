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

// The element-wise kernels a table may time apart from plain streams, because their arithmetic
// (transcendentals, reductions, random numbers) can cost more than their memory traffic: "gelu",
// "softmax" (and cross-entropy), "layernorm" (and RMSNorm), "dropout" (and residual adds with
// dropout). Empty for a plain stream. Read from the kernel's name, as models/ names them.
std::string elementwise_kind(const models::Kernel& k);

// Kernel times measured on one device (`dtsim profile`): GEMMs and convolutions by (implicit)
// GEMM shape, element-wise kernels by bytes moved. Each time is a median; `spread` is its
// samples' relative spread (1.4826 MAD / median), 0 in tables written before spreads were kept.
struct KernelTable {
  struct Gemm {
    std::int64_t batch = 1, m = 0, n = 0, k = 0;
    double seconds = 0;
    double spread = 0;
    int runs = 0;
  };
  struct Memory {
    double bytes = 0, seconds = 0;
    double spread = 0;
    int runs = 0;
  };
  nlohmann::json provenance;  // device, CPU or GPU model, ISA, threads, compiler, libraries, load, date
  std::string dtype = "fp32";
  std::vector<Gemm> gemms;
  std::vector<Gemm> convs;                                 // convolutions by implicit-GEMM shape (batch = groups)
  std::vector<Memory> memory;                              // plain streams (y = a x + y)
  std::map<std::string, std::vector<Memory>> elementwise;  // by elementwise_kind
  // A near-empty op's time through a framework-like dispatch, added to every kernel's time.
  double launch_overhead_s = 0;
  double launch_overhead_spread = 0;
  // The profiler judged its timings untrustworthy (provenance/timing/noisy_reasons says why).
  bool noisy = false;

  struct Price {
    double seconds = 0;
    PriceSource source = PriceSource::Exact;
    double spread = 0;  // relative
  };
  // Exact shape, else interpolation along the measured rate-vs-size curve (inside the measured
  // range), else nothing: the caller falls back to the roofline. Element-wise kernels of a kind
  // the table timed use that kind's curve, else the streams'. Without the launch overhead.
  std::optional<Price> quote(const models::Kernel& k) const;
  std::optional<std::pair<double, PriceSource>> price(const models::Kernel& k) const;

  nlohmann::json to_json() const;
  static KernelTable from_json(const nlohmann::json& j, const std::string& file);  // InputError on bad input
};

}  // namespace dtsim::cost
