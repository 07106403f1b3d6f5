#include <cmath>
#include <filesystem>
#include <regex>

#include <fmt/format.h>

#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "sim/core/json_reader.hpp"
#include "sim/core/key_catalog.hpp"
#include "sim/core/paths.hpp"

namespace dtsim::config {

using units::Dimension;

namespace {
cost::EfficiencyCurve curve(Reader& parent, const char* key, const char* half_key) {
  Reader r = parent.object(key);
  cost::EfficiencyCurve c;
  c.max = r.number("max", Range{0.0, 1.0, true});
  c.half = r.number(half_key, Range{0.0, 1e18});
  if (r.has("points")) c.points = r.efficiency_points("points");
  r.finish();
  return c;
}

// FP8 GEMMs reach a different fraction of their (doubled) peak than 16-bit ones; block-scaled
// ones (cost::DeviceProfile::fp8_block_gemm) another, by K too.
void read_fp8_curves(Reader& r, cost::DeviceProfile& d) {
  if (r.has("fp8_gemm_efficiency")) d.fp8_gemm = curve(r, "fp8_gemm_efficiency", "half_flops");
  if (auto b = r.optional_object("fp8_block_gemm_efficiency")) {
    d.fp8_block_k_overhead = b->number("k_overhead", Range{0.0, 1e6});
    d.fp8_block_gemm = cost::EfficiencyCurve{b->number("max", Range{0.0, 1.0, true}), b->number("half_flops", Range{0.0, 1e18}), {}};
    b->finish();
  }
}
}  // namespace


cost::DeviceProfile load_device_profile(const std::string& name) {
  static const std::regex safe("[A-Za-z0-9._-]+");
  if (name.size() > kMaxNameChars || !std::regex_match(name, safe))
    throw InputError("", "", fmt::format("bad device name \"{}\" (letters, digits, '.', '_', '-'; at most {} characters)",
                                         name.substr(0, 64) + (name.size() > 64 ? "..." : ""), kMaxNameChars));
  const std::string file = data_dir() + "/hardware_profiles/" + name + ".json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec))
    throw InputError("", "", fmt::format("unknown device \"{}\" (known: {})", name,
                                         fmt::join(list_json_stems("hardware_profiles"), ", ")));
  return load_device_profile_file(file);
}

cost::DeviceProfile load_device_profile_file(const std::string& file) {
  Json doc = parse_json_file(file);
  auto origins = std::make_shared<Origins>();
  origins->default_file = file;
  const CatalogDocument kind("device profile");
  Reader r(doc, "", origins);
  cost::DeviceProfile d;
  d.file = file;
  d.name = r.text("name");
  d.description = r.text("description", "");
  Reader peaks = r.object("peak_tflops");
  for (const char* dtype : {"fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp4"})
    if (peaks.has(dtype)) d.peak_flops[dtype] = peaks.number_in(dtype, Dimension::FlopRate, 1e12, Range{0.0, 1e6, true});
  peaks.finish();
  if (!d.peak_flops.contains("fp32")) peaks.fail("fp32", "required key is missing");
  d.memory_bytes = r.quantity("memory", Dimension::Bytes, Range{0.0, 1e15, true});
  d.hbm_bandwidth = r.quantity("hbm_bandwidth", Dimension::Bandwidth, Range{0.0, 1e15, true});
  d.gemm = curve(r, "gemm_efficiency", "half_flops");
  d.memory = curve(r, "memory_efficiency", "half_bytes");
  read_fp8_curves(r, d);
  if (r.has("conv_efficiency")) d.conv = curve(r, "conv_efficiency", "half_flops");
  d.kernel_min_s = r.quantity("kernel_min", Dimension::Time, Range{0.0, 1.0}, 0.0);
  // Per-kernel dispatch or launch cost; absent: the kernel table's measured one, else 0.
  d.launch_overhead_s = r.optional_quantity("launch_overhead", Dimension::Time, Range{0.0, 1.0});
  if (auto a = r.optional_object("attention")) {
    d.scores_memory_efficiency = a->number("scores_memory_efficiency", Range{0.0, 1.0, true}, 1.0);
    d.flash_attention_efficiency = a->number("flash_efficiency", Range{0.0, 1.0, true}, 1.0);
    a->finish();
  }
  d.comm_core_share = r.number("comm_core_share", Range{0.0, 0.95}, 0.0);
  // Whether unaligned GEMMs run slower (sim/cost/gemm_alignment.hpp): NVIDIA's cuBLAS, or none.
  d.gemm_alignment = r.choice("gemm_alignment", {"none", "cublas"}, "none") == "cublas" ? cost::GemmAlignment::Cublas
                                                                                         : cost::GemmAlignment::None;
  // The K-loop's fixed cost per GEMM tile (sim/cost/gemm_alignment.hpp, gemm_depth_rate).
  if (auto k = r.optional_object("gemm_k_loop")) {
    d.gemm_k_overhead = k->number("overhead", Range{0.0, 1e6});
    d.gemm_k_reference = k->number("reference", Range{1.0, 1e9});
    k->finish();
  }
  // Eager batch norm's kernels as measured on the device (sim/cost/batch_norm_kernels.hpp).
  if (auto b = r.optional_object("eager_batch_norm")) {
    const Range rate{1e6, 1e15};
    d.eager_batch_norm = cost::BatchNormRates{b->quantity("statistics", Dimension::Bandwidth, rate),
                                              b->quantity("transform", Dimension::Bandwidth, rate),
                                              b->quantity("backward_reduce", Dimension::Bandwidth, rate),
                                              b->quantity("backward_input", Dimension::Bandwidth, rate)};
    b->finish();
  }
  // The published attention tables of the GPU the profile is (sim/cost/attention_rates.cpp).
  d.attention_tables = r.choice("attention_tables", {"h100-sxm5", "a100-sxm4"}, "h100-sxm5") == "a100-sxm4"
                           ? cost::AttentionTables::A100
                           : cost::AttentionTables::H100;
  // Copies into a wider type (models::KernelRole::CastUp), as measured on the device.
  d.cast_up_bandwidth = r.quantity("cast_up_bandwidth", Dimension::Bandwidth, Range{0.0, 1e15, true}, 0.0);
  // Communication interference under a software stack (sim/cost/comm_interference.hpp).
  d.sm_count = static_cast<int>(r.integer("sm_count", 1, 100000, 0));
  d.nccl_sms = static_cast<int>(r.integer("nccl_sms", 0, 100000, 0));
  if (d.nccl_sms > 0 && d.nccl_sms >= d.sm_count)
    r.fail("nccl_sms", d.sm_count > 0 ? "must be fewer than sm_count" : "needs sm_count, the device's SMs");
  d.pcie_bandwidth = r.quantity("pcie_bandwidth", Dimension::Bandwidth, Range{0.0, 1e15, true}, 16e9);
  d.power_w = r.number("power_W", Range{0.0, 1e5, true}, 0.0);
  d.price_per_gpu_hour_usd = r.number("price_per_gpu_hour_usd", Range{0.0, 1e6, true}, 0.0);
  if (!r.raw("sources").is_object()) r.fail("sources", "expected an object naming the source of each number");
  if (r.has("kernel_table")) {
    // A measured table (`dtsim profile`), relative to hardware_profiles/.
    const std::string rel = r.text("kernel_table");
    if (!std::regex_match(rel, std::regex("[A-Za-z0-9._/-]+")) || rel.find("..") != std::string::npos)
      r.fail("kernel_table", "expected a path inside hardware_profiles/");
    const std::string path = data_dir() + "/hardware_profiles/" + rel;
    if (!std::filesystem::is_regular_file(path)) r.fail("kernel_table", fmt::format("\"{}\" not found", rel));
    d.kernels = cost::KernelTable::from_json(parse_json_file(path), path);
  }
  r.finish();
  return d;
}

std::string compute_dtype(strategies::Precision p) {
  switch (p) {
    case strategies::Precision::Fp64: return "fp64";
    case strategies::Precision::Fp32: return "fp32";
    case strategies::Precision::Tf32: return "tf32";
    case strategies::Precision::Bf16: return "bf16";
    case strategies::Precision::Fp16: return "fp16";
    case strategies::Precision::Fp8: return "bf16";  // all but the FP8 GEMMs (flagged per kernel)
  }
  return "fp32";
}

}  // namespace dtsim::config
