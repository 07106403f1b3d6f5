#include "sim/cost/comm_interference.hpp"

#include <algorithm>
#include <cmath>

namespace dtsim::cost {

namespace {

// The output tile of cuBLAS's Hopper bf16 GEMMs: nvjet_sm90_tst_256x128_* is the most frequent
// GEMM kernel in this project's H100 profiles (docs/gpu_check/h100-2026-11-26/results.json; its
// 320x128, 192x192 and 160x256 tiles are as large), one tile per SM at a time.
constexpr double kTileRows = 256, kTileCols = 128;

bool flash(const models::Kernel& k) {
  return k.role == models::KernelRole::FlashForward || k.role == models::KernelRole::FlashBackward;
}

}  // namespace

int comm_sms(const DeviceProfile& d) { return d.stack.comm_sms == kDeviceCommSms ? d.nccl_sms : d.stack.comm_sms; }

double sm_share(const DeviceProfile& d, int sms) {
  if (d.sm_count <= 0 || sms <= 0) return 0.0;
  return std::min(0.95, static_cast<double>(sms) / d.sm_count);  // the stack key refuses more (stack_config.cpp)
}

double comm_sm_share(const DeviceProfile& d) { return sm_share(d, comm_sms(d)); }

// Measured on an H200 beside 8-66 SMs taken (tests H200Microbench.*): a GEMM's output tiles run in
// waves over the SMs, and a wave that no longer fits costs a whole one (2048^3, one wave of 128
// tiles: 1.81-1.96 at any count); streaming kernels lose at most 5 % (a copy, a layer norm); flash
// attention and convolutions, grids of many short blocks, lose about their SMs' share.
double kernel_slowdown(const DeviceProfile& d, const models::Kernel& k, int sms) {
  const double share = sm_share(d, sms);
  if (share <= 0 || k.kind == models::KernelKind::Memory) return 1.0;
  const double all = d.sm_count, left = std::max(1.0, std::round(all * (1.0 - share)));
  if (k.kind != models::KernelKind::Gemm || flash(k) || k.m <= 0 || k.n <= 0) return all / left;
  const double tiles = std::max<double>(1.0, static_cast<double>(k.batch)) * std::ceil(k.m / kTileRows) *
                       std::ceil(k.n / kTileCols);
  return std::ceil(tiles / left) / std::ceil(tiles / all);
}

double comm_kernel_share(const DeviceProfile& d, const taskgraph::TaskGraph& g, const std::string& dtype) {
  const int sms = comm_sms(d);
  if (sm_share(d, sms) <= 0) return 0.0;
  std::vector<double> runs(g.works.size(), 0.0);
  for (const auto& t : g.tasks)
    if (!t.is_collective && t.work >= 0) runs[static_cast<std::size_t>(t.work)] += 1;
  double alone = 0, beside = 0;
  for (std::size_t w = 0; w < g.works.size(); ++w) {
    if (runs[w] == 0) continue;  // host work (fixed_seconds) has no kernels either
    // Each distinct work's kernels quoted once more (price_works keeps only their sum): once per
    // run, over distinct works, not per task.
    double kernels = 0, slowed = 0;
    for (const auto& k : g.works[w].kernels) {
      const double t = quote_kernel(d, k, dtype).seconds;
      kernels += t;
      slowed += t * kernel_slowdown(d, k, sms);
    }
    const double scale = runs[w] * g.works[w].repeat;
    alone += kernels * scale;
    beside += slowed * scale;
  }
  if (alone <= 0) return comm_sm_share(d);
  return std::clamp(1.0 - alone / beside, 0.0, 0.95);
}

}  // namespace dtsim::cost
