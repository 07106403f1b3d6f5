#include <gtest/gtest.h>

#include "sim/config/scenario.hpp"
#include "sim/cost/roofline.hpp"

using namespace dtsim;

namespace {
cost::DeviceProfile toy() {
  cost::DeviceProfile d;
  d.name = "toy";
  d.peak_flops = {{"fp32", 10e12}, {"bf16", 100e12}};
  d.hbm_bandwidth = 1e12;
  d.gemm = {0.8, 1e9};
  d.memory = {0.9, 1e6};
  d.kernel_min_s = 2e-6;
  return d;
}
models::Kernel gemm(double flops, double bytes) { return {"g", models::KernelKind::Gemm, 1, 1, 1, 1, flops, bytes}; }
}  // namespace

TEST(Roofline, LargeGemmRunsAtPeakTimesEfficiency) {
  auto d = toy();
  const double f = 1e13;
  // eff = 0.8 * F / (F + 1e9), so time = (F + 1e9) / (0.8 * peak).
  EXPECT_DOUBLE_EQ(cost::kernel_time(d, gemm(f, 1e6), "bf16"), (f + 1e9) / (0.8 * 100e12));
}

TEST(Roofline, MemoryBoundKernelIsPricedByBytes) {
  auto d = toy();
  models::Kernel k{"add", models::KernelKind::Memory, 1, 0, 0, 0, 1e6, 1e9};
  EXPECT_DOUBLE_EQ(cost::kernel_time(d, k, "bf16"), (1e9 + 1e6) / (0.9 * 1e12));
}

TEST(Roofline, TinyKernelCostsTheMinimum) {
  models::Kernel k{"add", models::KernelKind::Memory, 1, 0, 0, 0, 10, 10};
  EXPECT_DOUBLE_EQ(cost::kernel_time(toy(), k, "bf16"), 2e-6);
}

TEST(Roofline, SmallGemmsAreLessEfficient) {
  auto d = toy();
  double big = 1e12 / cost::kernel_time(d, gemm(1e12, 0), "bf16");
  double small = 1e8 / cost::kernel_time(d, gemm(1e8, 0), "bf16");
  EXPECT_LT(small, 0.2 * big);
}

TEST(DeviceProfiles, ShippedProfilesLoadWithSources) {
  for (const char* name : {"a100-sxm-80gb", "h100-sxm-80gb", "h200-sxm-141gb", "v100-sxm-32gb"}) {
    auto d = config::load_device_profile(name);
    EXPECT_GT(d.memory_bytes, 16e9) << name;
    EXPECT_GT(d.gemm.max, 0.5) << name;
    EXPECT_LE(d.gemm.max, 1.0) << name;
  }
  auto a100 = config::load_device_profile("a100-sxm-80gb");
  EXPECT_DOUBLE_EQ(a100.peak_flops.at("bf16"), 312e12);  // A100 datasheet, dense
  EXPECT_DOUBLE_EQ(a100.hbm_bandwidth, 2039e9);
}
