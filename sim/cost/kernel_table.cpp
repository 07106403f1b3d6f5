#include "sim/cost/kernel_table.hpp"

#include <algorithm>
#include <cmath>

#include "sim/core/errors.hpp"
#include "sim/core/json_reader.hpp"

namespace dtsim::cost {

const char* to_string(PriceSource s) {
  switch (s) {
    case PriceSource::Exact: return "measured";
    case PriceSource::Interpolated: return "interpolated";
    case PriceSource::Roofline: return "roofline";
  }
  return "?";
}

namespace {

// Rate (work per second) at `size`, interpolated in log-log space between the measured points
// around it; nothing outside the measured range.
std::optional<double> rate_at(std::vector<std::pair<double, double>> pts, double size) {
  if (pts.empty() || size <= 0) return std::nullopt;
  std::sort(pts.begin(), pts.end());
  if (size < pts.front().first || size > pts.back().first) return std::nullopt;
  auto hi = std::lower_bound(pts.begin(), pts.end(), std::make_pair(size, 0.0));
  if (hi->first == size || hi == pts.begin()) return hi->second;
  auto lo = std::prev(hi);
  const double t = (std::log(size) - std::log(lo->first)) / (std::log(hi->first) - std::log(lo->first));
  return std::exp(std::log(lo->second) + t * (std::log(hi->second) - std::log(lo->second)));
}

}  // namespace

std::optional<std::pair<double, PriceSource>> KernelTable::price(const models::Kernel& k) const {
  if (k.kind == models::KernelKind::Memory) {
    for (const auto& m : memory)
      if (m.bytes == k.bytes) return std::make_pair(m.seconds, PriceSource::Exact);
    std::vector<std::pair<double, double>> pts;
    for (const auto& m : memory) pts.emplace_back(m.bytes, m.bytes / m.seconds);
    if (auto r = rate_at(pts, k.bytes)) return std::make_pair(k.bytes / *r, PriceSource::Interpolated);
    return std::nullopt;
  }
  // A convolution is looked up among convolutions when the table times any (they pay for
  // im2col or their algorithm's overheads), else as the GEMM of its shape.
  const auto& shapes = k.kind == models::KernelKind::Conv && !convs.empty() ? convs : gemms;
  for (const auto& g : shapes)
    if (g.batch == k.batch && g.m == k.m && g.n == k.n && g.k == k.k) return std::make_pair(g.seconds, PriceSource::Exact);
  std::vector<std::pair<double, double>> pts;
  for (const auto& g : shapes) {
    const double flops = 2.0 * static_cast<double>(g.batch) * static_cast<double>(g.m) * static_cast<double>(g.n) *
                         static_cast<double>(g.k);
    pts.emplace_back(flops, flops / g.seconds);
  }
  if (auto r = rate_at(pts, k.flops)) return std::make_pair(k.flops / *r, PriceSource::Interpolated);
  return std::nullopt;
}

nlohmann::json KernelTable::to_json() const {
  nlohmann::json g = nlohmann::json::array(), c = nlohmann::json::array(), m = nlohmann::json::array();
  for (const auto& x : gemms) g.push_back({{"batch", x.batch}, {"m", x.m}, {"n", x.n}, {"k", x.k}, {"seconds", x.seconds}});
  for (const auto& x : convs) c.push_back({{"batch", x.batch}, {"m", x.m}, {"n", x.n}, {"k", x.k}, {"seconds", x.seconds}});
  for (const auto& x : memory) m.push_back({{"bytes", x.bytes}, {"seconds", x.seconds}});
  nlohmann::json j{{"provenance", provenance}, {"dtype", dtype}, {"gemm", g}};
  if (!convs.empty()) j["conv"] = c;
  j["memory"] = m;
  return j;
}

KernelTable KernelTable::from_json(const nlohmann::json& j, const std::string& file) {
  auto origins = std::make_shared<Origins>();
  origins->default_file = file;
  Reader r(j, "", origins);
  KernelTable t;
  t.provenance = r.raw("provenance");
  if (!t.provenance.is_object()) r.fail("provenance", "expected an object");
  t.dtype = r.choice("dtype", {"fp32", "tf32", "bf16", "fp16"});
  const Json& g = r.raw("gemm");
  const Json& m = r.raw("memory");
  if (!g.is_array()) r.fail("gemm", "expected an array");
  if (!m.is_array()) r.fail("memory", "expected an array");
  auto shapes = [&](const Json& list, const std::string& key, std::vector<Gemm>& out) {
    for (std::size_t i = 0; i < list.size(); ++i) {
      Reader e(list[i], "/" + key + "/" + std::to_string(i), origins);
      Gemm x;
      x.batch = e.integer("batch", 1, std::int64_t{1} << 40, 1);
      x.m = e.integer("m", 1, std::int64_t{1} << 40);
      x.n = e.integer("n", 1, std::int64_t{1} << 40);
      x.k = e.integer("k", 1, std::int64_t{1} << 40);
      x.seconds = e.number("seconds", Range{0.0, 1e6, true});
      e.finish();
      out.push_back(x);
    }
  };
  shapes(g, "gemm", t.gemms);
  if (r.has("conv")) {
    const Json& c = r.raw("conv");
    if (!c.is_array()) r.fail("conv", "expected an array");
    shapes(c, "conv", t.convs);
  }
  for (std::size_t i = 0; i < m.size(); ++i) {
    Reader e(m[i], "/memory/" + std::to_string(i), origins);
    Memory x;
    x.bytes = e.number("bytes", Range{0.0, 1e15, true});
    x.seconds = e.number("seconds", Range{0.0, 1e6, true});
    e.finish();
    t.memory.push_back(x);
  }
  r.finish();
  return t;
}

}  // namespace dtsim::cost
