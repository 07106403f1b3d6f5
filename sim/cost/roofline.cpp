#include "sim/cost/roofline.hpp"

#include <algorithm>
#include <stdexcept>

#include "sim/core/interpolate.hpp"

namespace dtsim::cost {

namespace {
double peak(const DeviceProfile& d, const std::string& dtype) {
  auto it = d.peak_flops.find(dtype);
  if (it == d.peak_flops.end()) throw std::invalid_argument(d.name + " has no peak for " + dtype);
  return it->second;
}

// An FP8 GEMM's share of the FP8 peak: on the block-scaled kernels' curve where it is one and the
// device has it, else on the FP8 curve, else at `sixteen_bit`, the 16-bit curve's.
double fp8_efficiency(const DeviceProfile& d, const models::Kernel& k, double sixteen_bit) {
  if (k.fp8_block && d.fp8_block_gemm) {
    const double K = static_cast<double>(k.k);
    return d.fp8_block_gemm->at(k.flops) * K / (K + d.fp8_block_k_overhead);
  }
  return d.fp8_gemm ? d.fp8_gemm->at(k.flops) : sixteen_bit;
}
}  // namespace

double EfficiencyCurve::at(double x) const {
  auto smooth = [&](double v) { return v <= 0 ? max : max * v / (v + half); };
  if (points.empty()) return smooth(x);
  if (x <= points.front().first) return points.front().second * smooth(x) / smooth(points.front().first);
  return log_interpolate(points, x);
}

double kernel_time(const DeviceProfile& d, const models::Kernel& k, const std::string& dtype, double rate) {
  double compute = 0;
  if (k.kind == models::KernelKind::Memory) {
    compute = k.flops / peak(d, "fp32");
  } else {
    double e = k.kind == models::KernelKind::Conv && d.conv ? d.conv->at(k.flops) : d.gemm.at(k.flops);
    if (k.kind == models::KernelKind::Attention && !k.scores) e = std::min(e, d.flash_attention_efficiency);
    if (k.fp8) e = fp8_efficiency(d, k, e);
    compute = k.flops / (peak(d, k.fp8 ? std::string("fp8") : dtype) * e * rate);
  }
  double traffic = k.bytes / (d.hbm_bandwidth * d.memory.at(k.bytes) * (k.scores ? d.scores_memory_efficiency : 1.0));
  if (k.role == models::KernelRole::CastUp && d.cast_up_bandwidth > 0) traffic = std::max(traffic, k.bytes / d.cast_up_bandwidth);
  return std::max({compute, traffic, d.kernel_min_s});
}

double launch_overhead(const DeviceProfile& d, const std::string& dtype) {
  if (d.launch_overhead_s) return *d.launch_overhead_s;
  if (d.kernels && d.kernels->dtype == dtype) return d.kernels->launch_overhead_s;
  return 0.0;
}

KernelPrice quote_kernel(const DeviceProfile& d, const models::Kernel& k, const std::string& dtype) {
  // The default stack's fused kernels are the model's own, but for a bias's gradient, which the
  // stack runs as a kernel of its own (element_plan).
  const bool own = d.stack.is_default() && k.role != models::KernelRole::BiasWeightGrad;
  return own ? quote_unstacked(d, k, dtype) : quote_stacked(d, k, dtype);
}

KernelPrice quote_unstacked(const DeviceProfile& d, const models::Kernel& k, const std::string& dtype) {
  const double overhead = launch_overhead(d, dtype);
  // A measured table holds one dtype's GEMMs; its memory rows time copies, which a cast up is not
  // where the device has its own rate.
  const bool cast_up = k.role == models::KernelRole::CastUp && d.cast_up_bandwidth > 0;
  if (d.kernels && d.kernels->dtype == dtype && !k.fp8 && !cast_up)
    if (auto measured = d.kernels->quote(k)) return {measured->seconds + overhead, measured->source, measured->spread};
  return {kernel_time(d, k, dtype) + overhead, PriceSource::Roofline, 0.0};
}

std::pair<double, PriceSource> price_kernel(const DeviceProfile& d, const models::Kernel& k, const std::string& dtype) {
  const auto q = quote_kernel(d, k, dtype);
  return {q.seconds, q.source};
}

Priced price_works(const taskgraph::TaskGraph& g, const DeviceProfile& d, const std::string& dtype) {
  Priced out;
  out.seconds.reserve(g.works.size());
  out.measured_seconds.reserve(g.works.size());
  out.spread_seconds.reserve(g.works.size());
  for (const auto& w : g.works) {
    double s = 0, measured = 0, spread = 0;
    for (const auto& k : w.kernels) {
      const auto q = quote_kernel(d, k, dtype);
      s += q.seconds;
      if (q.source != PriceSource::Roofline) measured += q.seconds;
      spread += q.seconds * q.spread;
    }
    out.seconds.push_back(s * w.repeat);
    out.measured_seconds.push_back(measured * w.repeat);
    out.spread_seconds.push_back(spread * w.repeat);
  }
  return out;
}

}  // namespace dtsim::cost
