#include "sim/cost/kernel_table.hpp"

#include <algorithm>
#include <cmath>

#include "sim/core/errors.hpp"
#include "sim/core/json_reader.hpp"
#include "sim/core/key_catalog.hpp"

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

struct Point {
  double size = 0, rate = 0, spread = 0;
};

// Rate (work per second) at `size`, interpolated in log-log space between the measured points
// around it, and the spread interpolated alike; nothing outside the measured range.
std::optional<Point> rate_at(std::vector<Point> pts, double size) {
  if (pts.empty() || size <= 0) return std::nullopt;
  std::sort(pts.begin(), pts.end(), [](const Point& a, const Point& b) { return a.size < b.size; });
  if (size < pts.front().size || size > pts.back().size) return std::nullopt;
  auto hi = std::lower_bound(pts.begin(), pts.end(), size, [](const Point& p, double s) { return p.size < s; });
  if (hi->size == size || hi == pts.begin()) return *hi;
  auto lo = std::prev(hi);
  const double t = (std::log(size) - std::log(lo->size)) / (std::log(hi->size) - std::log(lo->size));
  return Point{size, std::exp(std::log(lo->rate) + t * (std::log(hi->rate) - std::log(lo->rate))),
               lo->spread + t * (hi->spread - lo->spread)};
}

std::optional<KernelTable::Price> memory_price(const std::vector<KernelTable::Memory>& entries, double bytes) {
  for (const auto& m : entries)
    if (m.bytes == bytes) return KernelTable::Price{m.seconds, PriceSource::Exact, m.spread};
  std::vector<Point> pts;
  for (const auto& m : entries) pts.push_back({m.bytes, m.bytes / m.seconds, m.spread});
  if (auto r = rate_at(pts, bytes)) return KernelTable::Price{bytes / r->rate, PriceSource::Interpolated, r->spread};
  return std::nullopt;
}

const std::vector<std::string>& elementwise_kinds() {
  static const std::vector<std::string> kinds{"gelu", "softmax", "layernorm", "dropout"};
  return kinds;
}

}  // namespace

std::string elementwise_kind(const models::Kernel& k) {
  if (k.kind != models::KernelKind::Memory) return "";
  const std::string& n = k.name;
  auto has = [&](const char* s) { return n.find(s) != std::string::npos; };
  if (has("gelu") || has("swiglu")) return "gelu";  // SwiGLU's SiLU: one transcendental per element too
  if (has("softmax") || n.rfind("cross_entropy", 0) == 0) return "softmax";
  if (has("norm")) return "layernorm";
  if (has("dropout")) return "dropout";
  // A residual add with dropout does 3 FLOPs per element (6 backward) against 1 (2) without, over
  // the same bytes: at 2 or 4 bytes per element, at least 0.25 FLOP per byte with dropout and at
  // most 0.2 without (models/transformer.cpp, dropout_add).
  if (has("residual") && k.bytes > 0 && k.flops / k.bytes >= 0.22) return "dropout";
  return "";
}

std::optional<KernelTable::Price> KernelTable::quote(const models::Kernel& k) const {
  if (k.kind == models::KernelKind::Memory) {
    const std::string kind = elementwise_kind(k);
    if (auto it = elementwise.find(kind); !kind.empty() && it != elementwise.end())
      if (auto p = memory_price(it->second, k.bytes)) return p;
    return memory_price(memory, k.bytes);
  }
  // A convolution is looked up among convolutions when the table times any (they pay for
  // im2col or their algorithm's overheads), else as the GEMM of its shape.
  const auto& shapes = k.kind == models::KernelKind::Conv && !convs.empty() ? convs : gemms;
  for (const auto& g : shapes)
    if (g.batch == k.batch && g.m == k.m && g.n == k.n && g.k == k.k) {
      // A fused kernel timed as the one GEMM of its shape does more: flash attention's forward
      // is two such products (QK^T and PV), its backward five. It runs at that GEMM's rate over
      // its own FLOPs; a plain GEMM's FLOPs are its shape's, and its time the measured one.
      const double shape_flops = 2.0 * static_cast<double>(g.batch) * static_cast<double>(g.m) *
                                 static_cast<double>(g.n) * static_cast<double>(g.k);
      const double scale = k.flops > shape_flops * (1 + 1e-9) ? k.flops / shape_flops : 1.0;
      return Price{g.seconds * scale, PriceSource::Exact, g.spread};
    }
  std::vector<Point> pts;
  for (const auto& g : shapes) {
    const double flops = 2.0 * static_cast<double>(g.batch) * static_cast<double>(g.m) * static_cast<double>(g.n) *
                         static_cast<double>(g.k);
    pts.push_back({flops, flops / g.seconds, g.spread});
  }
  if (auto r = rate_at(pts, k.flops)) return Price{k.flops / r->rate, PriceSource::Interpolated, r->spread};
  return std::nullopt;
}

std::optional<std::pair<double, PriceSource>> KernelTable::price(const models::Kernel& k) const {
  if (auto q = quote(k)) return std::make_pair(q->seconds, q->source);
  return std::nullopt;
}

namespace {

nlohmann::json gemm_json(const std::vector<KernelTable::Gemm>& entries) {
  nlohmann::json g = nlohmann::json::array();
  for (const auto& x : entries)
    g.push_back({{"batch", x.batch}, {"m", x.m}, {"n", x.n}, {"k", x.k}, {"seconds", x.seconds}, {"spread", x.spread},
                 {"runs", x.runs}});
  return g;
}

std::vector<KernelTable::Gemm> read_gemms(const Json& g, const std::string& at, const std::shared_ptr<Origins>& origins) {
  std::vector<KernelTable::Gemm> out;
  for (std::size_t i = 0; i < g.size(); ++i) {
    Reader e(g[i], at + "/" + std::to_string(i), origins);
    KernelTable::Gemm x;
    x.batch = e.integer("batch", 1, std::int64_t{1} << 40, 1);
    x.m = e.integer("m", 1, std::int64_t{1} << 40);
    x.n = e.integer("n", 1, std::int64_t{1} << 40);
    x.k = e.integer("k", 1, std::int64_t{1} << 40);
    x.seconds = e.number("seconds", Range{0.0, 1e6, true});
    x.spread = e.number("spread", Range{0.0, 100.0}, 0.0);
    x.runs = static_cast<int>(e.integer("runs", 0, 1'000'000'000, 0));
    e.finish();
    out.push_back(x);
  }
  return out;
}

nlohmann::json memory_json(const std::vector<KernelTable::Memory>& entries) {
  nlohmann::json m = nlohmann::json::array();
  for (const auto& x : entries)
    m.push_back({{"bytes", x.bytes}, {"seconds", x.seconds}, {"spread", x.spread}, {"runs", x.runs}});
  return m;
}

std::vector<KernelTable::Memory> read_memory(const Json& m, const std::string& at, const std::shared_ptr<Origins>& origins) {
  std::vector<KernelTable::Memory> out;
  for (std::size_t i = 0; i < m.size(); ++i) {
    Reader e(m[i], at + "/" + std::to_string(i), origins);
    KernelTable::Memory x;
    x.bytes = e.number("bytes", Range{0.0, 1e15, true});
    x.seconds = e.number("seconds", Range{0.0, 1e6, true});
    x.spread = e.number("spread", Range{0.0, 100.0}, 0.0);
    x.runs = static_cast<int>(e.integer("runs", 0, 1'000'000'000, 0));
    e.finish();
    out.push_back(x);
  }
  return out;
}

}  // namespace

nlohmann::json KernelTable::to_json() const {
  nlohmann::json e = nlohmann::json::object();
  for (const auto& [kind, entries] : elementwise) e[kind] = memory_json(entries);
  nlohmann::json j{{"provenance", provenance}, {"dtype", dtype}, {"gemm", gemm_json(gemms)}};
  if (!convs.empty()) j["conv"] = gemm_json(convs);  // absent when none: older readers still load it
  j["memory"] = memory_json(memory);
  j["elementwise"] = e;
  j["launch_overhead_us"] = launch_overhead_s * 1e6;
  j["launch_overhead_spread"] = launch_overhead_spread;
  j["noisy"] = noisy;
  return j;
}

// Tables written before spreads, element-wise kinds, launch overhead and the noisy flag load
// with those absent: spreads 0, streams for every element-wise kernel, no overhead, not noisy.
KernelTable KernelTable::from_json(const nlohmann::json& j, const std::string& file) {
  auto origins = std::make_shared<Origins>();
  origins->default_file = file;
  const CatalogDocument kind("kernel table");
  Reader r(j, "", origins);
  KernelTable t;
  t.provenance = r.raw("provenance");
  if (!t.provenance.is_object()) r.fail("provenance", "expected an object");
  t.dtype = r.choice("dtype", {"fp32", "tf32", "bf16", "fp16"});
  const Json& g = r.raw("gemm");
  const Json& m = r.raw("memory");
  if (!g.is_array()) r.fail("gemm", "expected an array");
  if (!m.is_array()) r.fail("memory", "expected an array");
  t.gemms = read_gemms(g, "/gemm", origins);
  if (r.has("conv")) {
    const Json& c = r.raw("conv");
    if (!c.is_array()) r.fail("conv", "expected an array");
    t.convs = read_gemms(c, "/conv", origins);
  }
  t.memory = read_memory(m, "/memory", origins);
  if (auto e = r.optional_object("elementwise")) {
    for (const auto& kind : elementwise_kinds())
      if (e->has(kind)) {
        const Json& list = e->raw(kind);
        if (!list.is_array()) e->fail(kind, "expected an array");
        t.elementwise[kind] = read_memory(list, e->pointer(kind), origins);
      }
    e->finish();
  }
  t.launch_overhead_s = r.quantity("launch_overhead", units::Dimension::Time, Range{0.0, 1.0}, 0.0);
  t.launch_overhead_spread = r.number("launch_overhead_spread", Range{0.0, 100.0}, 0.0);
  t.noisy = r.boolean("noisy", false);
  r.finish();
  return t;
}

}  // namespace dtsim::cost
