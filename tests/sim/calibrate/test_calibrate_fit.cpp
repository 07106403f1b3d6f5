// Issue 27 item 2, `dtsim calibrate`: measurements made by dtsim's own models from a known profile
// are fitted back to that profile, from a base that is several times off.
#include <gtest/gtest.h>

#include <cmath>

#include "sim/calibrate/kernel_fit.hpp"
#include "sim/calibrate/least_squares.hpp"
#include "sim/calibrate/nccl_fit.hpp"
#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "sim/cost/roofline.hpp"

namespace {

using namespace dtsim;
using namespace dtsim::calibrate;
using taskgraph::CollectiveOp;

TEST(CalibrateLeastSquares, ConsistentRowsGiveTheirExactSolution) {
  // 2x + 3y = 8 and x - y = -1: x = 1, y = 2.
  const auto x = solve({{2, 3, 8}, {1, -1, -1}, {4, 6, 16}}, Bounds{});
  ASSERT_TRUE(x);
  EXPECT_NEAR((*x)[0], 1.0, 1e-12);
  EXPECT_NEAR((*x)[1], 2.0, 1e-12);
}

TEST(CalibrateLeastSquares, ABoundHoldsAndTheOtherUnknownIsBestGivenIt) {
  // Unconstrained x = -1, y = 2 (x + y = 1, x - y = -3); with x >= 0: x = 0 and y the best for
  // y = 1, -y = -3 -> y = 2.
  Bounds b;
  b.min = {0.0, 0.0};
  const auto x = solve({{1, 1, 1}, {1, -1, -3}}, b);
  ASSERT_TRUE(x);
  EXPECT_EQ((*x)[0], 0.0);
  EXPECT_NEAR((*x)[1], 2.0, 1e-12);
}

TEST(CalibrateLeastSquares, ParallelColumnsCannotBeSeparated) {
  EXPECT_FALSE(separable({{1, 2, 1}, {2, 4, 2}}));
  EXPECT_TRUE(separable({{1, 2, 1}, {2, 3, 2}}));
  Bounds b;
  b.fixed[0] = 0.5;  // held: the other is fitted alone
  const auto x = solve({{1, 2, 3}, {2, 4, 6}}, b);
  ASSERT_TRUE(x);
  EXPECT_EQ((*x)[0], 0.5);
  EXPECT_NEAR((*x)[1], 1.25, 1e-12);
}

// A DGX-like cluster with round numbers, no efficiency curve and no NCCL floor: every price is
// alpha-beta in each tier's latency and 1/bandwidth.
network::ClusterSpec known_cluster() {
  network::ClusterSpec c;
  c.name = "known";
  c.gpus_per_node = 8;
  c.intra_bandwidth = 180e9;
  c.intra_latency = 2.5e-6;
  c.nics_per_node = 4;
  c.nic_bandwidth = 40e9;
  c.inter_latency = 7e-6;
  return c;
}

// nccl-tests' table of `op` on `nodes` x 8 ranks, its times dtsim's own on `c`.
NcclTestsFile table(const network::ClusterSpec& c, CollectiveOp op, int nodes) {
  NcclTestsFile f;
  f.path = "made-in-test";
  f.op = op;
  for (int r = 0; r < 8 * nodes; ++r) f.host_of_rank.push_back("host" + std::to_string(r / 8));
  const Placement p = place(c, f);
  for (double s = 1024; s <= 1.1e9; s *= 4) f.rows.push_back({0, s, collective_seconds(c, f, p, s) * 1e6, 0, 0});
  return f;
}

TEST(CalibrateCollectives, TablesFromAKnownClusterFitBackToIt) {
  const auto known = known_cluster();
  network::ClusterSpec base = known;  // 2-7x off in every fitted value
  base.intra_bandwidth = 60e9, base.intra_latency = 10e-6, base.nic_bandwidth = 10e9, base.inter_latency = 1e-6;
  const std::vector<NcclTestsFile> files{table(known, CollectiveOp::AllReduce, 1), table(known, CollectiveOp::AllGather, 1),
                                         table(known, CollectiveOp::AllReduce, 2), table(known, CollectiveOp::ReduceScatter, 2),
                                         table(known, CollectiveOp::AllToAll, 2), table(known, CollectiveOp::SendRecv, 2),
                                         table(known, CollectiveOp::Broadcast, 2)};
  const auto fit = fit_collectives(base, files);
  ASSERT_EQ(fit.tiers.size(), 2u);
  for (const auto& t : fit.tiers) {
    EXPECT_TRUE(t.latency_fitted && t.bandwidth_fitted) << to_string(t.tier) << ": " << t.note;
    EXPECT_LE(t.solves, 5) << "alpha-beta prices are linear: the first solve is the answer, the next confirms it";
  }
  EXPECT_NEAR(fit.cluster.intra_bandwidth / known.intra_bandwidth, 1.0, 1e-5);
  EXPECT_NEAR(fit.cluster.intra_latency / known.intra_latency, 1.0, 1e-5);
  EXPECT_NEAR(fit.cluster.nic_bandwidth / known.nic_bandwidth, 1.0, 1e-5);
  EXPECT_NEAR(fit.cluster.inter_latency / known.inter_latency, 1.0, 1e-5);
  for (const auto& r : fit.rows) EXPECT_NEAR(r.fitted_s / r.measured_s, 1.0, 1e-5) << "row of " << r.size << " bytes";
}

TEST(CalibrateCollectives, OneMessageSizeKeepsTheLatencyAndSaysWhy) {
  const auto known = known_cluster();
  NcclTestsFile f = table(known, CollectiveOp::AllReduce, 1);
  f.rows = {f.rows.back()};  // 1 GiB alone: bandwidth only
  network::ClusterSpec base = known;
  base.intra_bandwidth = 90e9;
  const auto fit = fit_collectives(base, {f});
  ASSERT_EQ(fit.tiers.size(), 1u);
  EXPECT_TRUE(fit.tiers[0].bandwidth_fitted);
  EXPECT_FALSE(fit.tiers[0].latency_fitted);
  EXPECT_FALSE(fit.tiers[0].note.empty());
  EXPECT_EQ(fit.cluster.intra_latency, known.intra_latency);
  EXPECT_NEAR(fit.cluster.intra_bandwidth / known.intra_bandwidth, 1.0, 1e-3);  // its latency share is 1e-4
}

TEST(CalibrateCollectives, AHostWithMoreRanksThanANodeHasGpusIsRefused) {
  NcclTestsFile f;
  f.path = "t.txt";
  f.host_of_rank.assign(16, "one-host");
  EXPECT_THROW(place(known_cluster(), f), InputError);
}

// The device the GEMM rows are made on: H100's peaks, a known 16-bit and FP8 curve.
cost::DeviceProfile known_device() {
  auto d = config::load_device_profile("h100-sxm-80gb");
  d.gemm = {0.7, 8e9, {}};
  d.fp8_gemm = cost::EfficiencyCurve{0.6, 1.2e10, {}};
  d.flash_attention_efficiency = 0.45;
  return d;
}

GemmRow gemm_row(int line, double m, double n, double k, const std::string& dtype, const cost::DeviceProfile& d) {
  GemmRow r{line, 1, m, n, k, dtype, 0};
  r.time_s = cost::kernel_time(d, r.kernel(), peak_dtype(dtype));
  return r;
}

TEST(CalibrateKernels, GemmRowsFromAKnownCurveFitBackToIt) {
  const auto known = known_device();
  std::vector<GemmRow> rows;
  int line = 2;
  for (double s : {512.0, 1024.0, 2048.0, 4096.0, 8192.0}) rows.push_back(gemm_row(line++, s, s, s, "bf16", known));
  rows.push_back(gemm_row(line++, 8192, 4096, 1024, "fp16", known));
  rows.push_back(gemm_row(line++, 16, 8192, 8192, "bf16", known));  // memory-bound: not the curve's
  for (double s : {1024.0, 4096.0, 16384.0}) rows.push_back(gemm_row(line++, s, s, s, "fp8", known));
  const auto base = config::load_device_profile("h100-sxm-80gb");
  const auto fit = fit_kernels(base, {{"gemm.csv", rows}}, {});
  ASSERT_EQ(fit.curves.size(), 2u);
  EXPECT_NEAR(fit.device.gemm.max, 0.7, 1e-5);
  EXPECT_NEAR(fit.device.gemm.half / 8e9, 1.0, 1e-5);
  EXPECT_TRUE(fit.device.gemm.points.empty());
  ASSERT_TRUE(fit.device.fp8_gemm);
  EXPECT_NEAR(fit.device.fp8_gemm->max, 0.6, 1e-5);
  EXPECT_NEAR(fit.device.fp8_gemm->half / 1.2e10, 1.0, 1e-5);
  EXPECT_TRUE(fit.curves[1].dropped_points) << "H100's FP8 curve has measured points, which the fit replaces";
  for (const auto& r : fit.rows) {
    EXPECT_NEAR(r.fitted_s / r.measured_s, 1.0, 1e-5) << "line " << r.line;
    EXPECT_EQ(r.used, r.bound == "compute") << "line " << r.line;
  }
  EXPECT_EQ(fit.rows[6].bound, "memory");
}

TEST(CalibrateKernels, AttentionFitsTheFlashCapAboveTheGemmCurve) {
  const auto known = known_device();
  std::vector<AttentionRow> rows;
  for (double seq : {512.0, 2048.0, 8192.0, 16384.0}) {
    AttentionRow r{static_cast<int>(seq), 1, 32, 32, seq, 128, true, "bf16", 0};
    r.time_s = cost::kernel_time(known, r.kernel(), "bf16");
    rows.push_back(r);
  }
  auto base = config::load_device_profile("h100-sxm-80gb");
  base.gemm = known.gemm;
  const auto fit = fit_kernels(base, {}, {{"attention.csv", rows}});
  ASSERT_EQ(fit.curves.size(), 1u);
  EXPECT_TRUE(fit.curves[0].fitted) << fit.curves[0].note;
  EXPECT_NEAR(fit.device.flash_attention_efficiency, 0.45, 1e-5);
  EXPECT_FALSE(fit.rows[0].used) << "512 tokens: the GEMM curve (below 0.45) prices it, not the cap";
  for (const auto& r : fit.rows) EXPECT_NEAR(r.fitted_s / r.measured_s, 1.0, 1e-5);
}

TEST(CalibrateKernels, AKernelFasterThanThePeakIsAnInputError) {
  const auto base = config::load_device_profile("h100-sxm-80gb");
  GemmRow r{7, 1, 8192, 8192, 8192, "bf16", 1e-4};  // 11,000 TFLOP/s
  try {
    (void)fit_kernels(base, {{"g.csv", {r}}}, {});
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "g.csv");
    EXPECT_EQ(e.pointer(), "7");
    EXPECT_NE(e.reason().find("above the device"), std::string::npos) << e.what();
  }
}

}  // namespace
