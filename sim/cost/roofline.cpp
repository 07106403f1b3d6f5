#include "sim/cost/roofline.hpp"

#include <algorithm>
#include <stdexcept>

namespace dtsim::cost {

namespace {
double peak(const DeviceProfile& d, const std::string& dtype) {
  auto it = d.peak_flops.find(dtype);
  if (it == d.peak_flops.end()) throw std::invalid_argument(d.name + " has no peak for " + dtype);
  return it->second;
}
}  // namespace

double kernel_time(const DeviceProfile& d, const models::Kernel& k, const std::string& dtype) {
  double compute = 0;
  if (k.kind == models::KernelKind::Memory) compute = k.flops / peak(d, "fp32");
  else compute = k.flops / (peak(d, dtype) * d.gemm.at(k.flops));
  double traffic = k.bytes / (d.hbm_bandwidth * d.memory.at(k.bytes));
  return std::max({compute, traffic, d.kernel_min_s});
}

std::vector<double> price_works(const taskgraph::TaskGraph& g, const DeviceProfile& d, const std::string& dtype) {
  std::vector<double> out;
  out.reserve(g.works.size());
  for (const auto& w : g.works) {
    double s = 0;
    for (const auto& k : w.kernels) s += kernel_time(d, k, dtype);
    out.push_back(s * w.repeat);
  }
  return out;
}

}  // namespace dtsim::cost
