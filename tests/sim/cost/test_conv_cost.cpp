// Convolutions priced like every other kernel: their own efficiency curve on the roofline, and
// their own rows in a measured kernel table.
#include <gtest/gtest.h>

#include "models/model_graph.hpp"
#include "sim/cost/roofline.hpp"

using namespace dtsim;

namespace {

cost::DeviceProfile device() {
  cost::DeviceProfile d;
  d.name = "toy";
  d.peak_flops = {{"fp32", 10e12}, {"bf16", 100e12}};
  d.hbm_bandwidth = 1e15;  // compute-bound throughout
  d.gemm = {0.8, 0, {}};
  d.memory = {0.9, 0, {}};
  return d;
}

// A ResNet-50 3x3 convolution of stage 1 on 32 images: 64 -> 64 channels at 56 x 56.
models::Kernel conv(models::ConvPass pass = models::ConvPass::Forward) {
  return models::conv_kernel("conv", {32, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, 1}, pass, 2);
}

}  // namespace

TEST(ConvCost, RooflineUsesTheConvolutionCurveElseGemmEfficiency) {
  auto d = device();
  const auto k = conv();
  // No curve of its own: the implicit GEMM at GEMM efficiency.
  EXPECT_DOUBLE_EQ(cost::kernel_time(d, k, "bf16"), k.flops / (100e12 * 0.8));
  d.conv = cost::EfficiencyCurve{0.5, 0, {}};
  EXPECT_DOUBLE_EQ(cost::kernel_time(d, k, "bf16"), k.flops / (100e12 * 0.5));
  // GEMMs keep theirs.
  models::Kernel g{"g", models::KernelKind::Gemm, 1, 4096, 4096, 4096, 2.0 * 4096 * 4096 * 4096, 0};
  EXPECT_DOUBLE_EQ(cost::kernel_time(d, g, "bf16"), g.flops / (100e12 * 0.8));
}

TEST(ConvCost, KernelTablesPriceConvolutionsFromTheirOwnRows) {
  cost::KernelTable t;
  const auto f = conv(), w = conv(models::ConvPass::Wgrad);
  t.gemms = {{f.batch, f.m, f.n, f.k, 1.0}};  // the same shape as a plain GEMM
  // Without convolution rows a convolution is the GEMM of its shape.
  ASSERT_TRUE(t.price(f));
  EXPECT_DOUBLE_EQ(t.price(f)->first, 1.0);
  t.convs = {{f.batch, f.m, f.n, f.k, 2.0}, {w.batch, w.m, w.n, w.k, 3.0}};
  EXPECT_DOUBLE_EQ(t.price(f)->first, 2.0);
  EXPECT_EQ(t.price(f)->second, cost::PriceSource::Exact);
  EXPECT_DOUBLE_EQ(t.price(w)->first, 3.0);
  // A GEMM is never priced from convolution rows.
  models::Kernel g = f;
  g.kind = models::KernelKind::Gemm;
  EXPECT_DOUBLE_EQ(t.price(g)->first, 1.0);
  // The rows survive the JSON round trip; tables without any still load.
  t.provenance = nlohmann::json::object();
  const auto back = cost::KernelTable::from_json(t.to_json(), "t.json");
  ASSERT_EQ(back.convs.size(), 2u);
  EXPECT_DOUBLE_EQ(back.convs[1].seconds, 3.0);
  auto j = t.to_json();
  j.erase("conv");
  EXPECT_TRUE(cost::KernelTable::from_json(j, "t.json").convs.empty());
}

TEST(ConvCost, ConvolutionRowsKeepTheirSpreadAndRuns) {
  cost::KernelTable t;
  const auto f = conv();
  t.gemms = {{f.batch, f.m, f.n, f.k, 1.0, 0.01, 5}};
  t.convs = {{f.batch, f.m, f.n, f.k, 2.0, 0.07, 9}};
  // quote prices a convolution from its own row, with that row's spread.
  const auto q = t.quote(f);
  ASSERT_TRUE(q);
  EXPECT_DOUBLE_EQ(q->seconds, 2.0);
  EXPECT_DOUBLE_EQ(q->spread, 0.07);
  t.provenance = nlohmann::json::object();
  const auto j = t.to_json();
  EXPECT_DOUBLE_EQ(j["conv"][0]["spread"].get<double>(), 0.07);
  const auto back = cost::KernelTable::from_json(j, "t.json");
  ASSERT_EQ(back.convs.size(), 1u);
  EXPECT_DOUBLE_EQ(back.convs[0].spread, 0.07);
  EXPECT_EQ(back.convs[0].runs, 9);
  // Convolution rows written before spreads load with spread 0 and runs 0.
  auto old = j;
  old["conv"][0].erase("spread");
  old["conv"][0].erase("runs");
  const auto older = cost::KernelTable::from_json(old, "t.json");
  EXPECT_DOUBLE_EQ(older.convs[0].spread, 0.0);
  EXPECT_EQ(older.convs[0].runs, 0);
}
