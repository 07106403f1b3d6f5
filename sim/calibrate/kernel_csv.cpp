#include "sim/calibrate/kernel_csv.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "sim/calibrate/text_input.hpp"
#include "sim/core/errors.hpp"
#include "sim/core/suggest.hpp"

namespace dtsim::calibrate {

namespace {

const std::vector<std::string>& dtypes() {
  static const std::vector<std::string> d{"fp32", "tf32", "bf16", "fp16", "fp8"};
  return d;
}

double element_bytes(const std::string& dtype) { return dtype == "fp32" || dtype == "tf32" ? 4.0 : dtype == "fp8" ? 1.0 : 2.0; }

struct Cells {
  const CsvTable& t;
  std::size_t row;
  std::string at() const { return std::to_string(t.rows[row].number); }
  const std::string& cell(const std::string& column) const { return t.cells[row][t.column(column)]; }
  double positive(const std::string& column) const {
    const double v = number_at(t.file, t.rows[row].number, cell(column), column);
    if (!(v > 0) || v > 1e15) throw InputError(t.file, at(), fmt::format("{}: {} is not a positive number up to 1e15", column, cell(column)));
    return v;
  }
  double whole(const std::string& column) const {
    const double v = positive(column);
    if (v != std::floor(v)) throw InputError(t.file, at(), fmt::format("{}: {} is not a whole number", column, cell(column)));
    return v;
  }
  std::string dtype() const {
    const std::string d = cell("dtype");
    if (std::find(dtypes().begin(), dtypes().end(), d) == dtypes().end())
      throw InputError(t.file, at(), fmt::format("dtype \"{}\" is not one of {}{}", d, fmt::join(dtypes(), ", "), did_you_mean(d, dtypes())));
    return d;
  }
};

bool truth(const Cells& c, const std::string& column) {
  const std::string v = c.cell(column);
  if (v == "true" || v == "1" || v == "True") return true;
  if (v == "false" || v == "0" || v == "False") return false;
  throw InputError(c.t.file, c.at(), fmt::format("{}: \"{}\" is not true or false (or 1, 0)", column, v));
}

}  // namespace

std::string peak_dtype(const std::string& dtype) { return dtype == "fp8" ? "bf16" : dtype; }

models::Kernel GemmRow::kernel() const {
  const double e = element_bytes(dtype);
  models::Kernel g{"gemm", models::KernelKind::Gemm, static_cast<std::int64_t>(batch), static_cast<std::int64_t>(m),
                   static_cast<std::int64_t>(n), static_cast<std::int64_t>(k), 2.0 * batch * m * n * k,
                   e * batch * (m * k + k * n + m * n)};
  if (dtype == "fp8") {
    g.fp8 = true;
    g.bytes = batch * (m * k + k * n + 2.0 * m * n);  // FP8 operands, a 16-bit output
  }
  return g;
}

models::Kernel AttentionRow::kernel() const {
  const double e = element_bytes(dtype), bh = batch * heads;
  models::Kernel f{"flash_attention", models::KernelKind::Attention, static_cast<std::int64_t>(bh), static_cast<std::int64_t>(seq),
                   static_cast<std::int64_t>(seq), static_cast<std::int64_t>(head_dim), 4.0 * bh * seq * seq * head_dim,
                   e * (2.0 * bh * seq * head_dim + 2.0 * batch * kv_heads * seq * head_dim)};
  f.role = models::KernelRole::FlashForward;
  f.causal = causal;
  return f;
}

std::vector<GemmRow> read_gemm_csv(const std::string& path) {
  const CsvTable t = read_csv(path);
  t.only({"m", "n", "k", "dtype", "time_us", "tflops", "batch"});
  for (const char* c : {"m", "n", "k", "dtype"}) (void)t.column(c);
  if (t.has("time_us") == t.has("tflops")) throw InputError(path, std::to_string(t.header_line), "give one of time_us and tflops");
  std::vector<GemmRow> out;
  for (std::size_t i = 0; i < t.rows.size(); ++i) {
    const Cells c{t, i};
    GemmRow r;
    r.line = t.rows[i].number;
    r.m = c.whole("m"), r.n = c.whole("n"), r.k = c.whole("k");
    r.batch = t.has("batch") ? c.whole("batch") : 1.0;
    r.dtype = c.dtype();
    r.time_s = t.has("time_us") ? c.positive("time_us") * 1e-6 : 2.0 * r.batch * r.m * r.n * r.k / (c.positive("tflops") * 1e12);
    out.push_back(r);
  }
  return out;
}

std::vector<AttentionRow> read_attention_csv(const std::string& path) {
  const CsvTable t = read_csv(path);
  t.only({"batch", "heads", "kv_heads", "seq", "head_dim", "causal", "time_us", "dtype"});
  for (const char* c : {"batch", "heads", "seq", "head_dim", "causal", "time_us"}) (void)t.column(c);
  std::vector<AttentionRow> out;
  for (std::size_t i = 0; i < t.rows.size(); ++i) {
    const Cells c{t, i};
    AttentionRow r;
    r.line = t.rows[i].number;
    r.batch = c.whole("batch"), r.heads = c.whole("heads"), r.seq = c.whole("seq"), r.head_dim = c.whole("head_dim");
    r.kv_heads = t.has("kv_heads") ? c.whole("kv_heads") : r.heads;
    r.causal = truth(c, "causal");
    if (t.has("dtype")) r.dtype = c.dtype();
    if (r.dtype == "fp8") throw InputError(path, c.at(), "dtype fp8: dtsim prices fused attention in 16-bit (no FP8 attention kernels)");
    r.time_s = c.positive("time_us") * 1e-6;
    out.push_back(r);
  }
  return out;
}

}  // namespace dtsim::calibrate
