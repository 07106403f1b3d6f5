#include <gtest/gtest.h>

#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "sim/cost/roofline.hpp"
#include "sim/network/collectives.hpp"

#include <cmath>
#include <cstdlib>
#include <fstream>

#include <nlohmann/json.hpp>

#include "helpers.hpp"

using namespace dtsim;

namespace {
cost::DeviceProfile toy() {
  cost::DeviceProfile d;
  d.name = "toy";
  d.peak_flops = {{"fp32", 10e12}, {"bf16", 100e12}};
  d.hbm_bandwidth = 1e12;
  d.gemm = {0.8, 1e9, {}};
  d.memory = {0.9, 1e6, {}};
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

namespace {
cost::KernelTable table() {
  cost::KernelTable t;
  t.gemms = {{1, 64, 64, 64, 1e-5}, {1, 1024, 1024, 1024, 2e-2}};
  t.memory = {{1e6, 1e-5}, {1e8, 2e-3}};
  return t;
}
models::Kernel square(std::int64_t n) {
  double f = 2.0 * n * n * n;
  return {"g", models::KernelKind::Gemm, 1, n, n, n, f, 12.0 * n * n};
}
}  // namespace

TEST(KernelTable, ExactShapeWins) {
  auto p = table().price(square(64));
  ASSERT_TRUE(p);
  EXPECT_DOUBLE_EQ(p->first, 1e-5);
  EXPECT_EQ(p->second, cost::PriceSource::Exact);
}

TEST(KernelTable, InterpolatesTheRateInLogSpace) {
  auto t = table();
  auto p = t.price(square(256));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->second, cost::PriceSource::Interpolated);
  // Rates at the ends: 2*64^3/1e-5 and 2*1024^3/2e-2; 256^3 sits halfway in log(FLOPs).
  const double r0 = 2.0 * 64 * 64 * 64 / 1e-5, r1 = 2.0 * 1024 * 1024 * 1024 / 2e-2;
  EXPECT_NEAR(p->first, 2.0 * 256 * 256 * 256 / std::sqrt(r0 * r1), 1e-12);
  auto m = t.price({"add", models::KernelKind::Memory, 1, 0, 0, 0, 0, 1e7});
  ASSERT_TRUE(m);
  EXPECT_NEAR(m->first, 1e7 / std::sqrt(1e6 / 1e-5 * 1e8 / 2e-3), 1e-12);
}

TEST(KernelTable, OutsideTheMeasuredRangeFallsBackToTheRoofline) {
  auto d = toy();
  d.peak_flops["fp32"] = 100e12;
  d.kernels = table();
  auto big = square(4096);
  EXPECT_FALSE(d.kernels->price(big));
  auto [s, source] = cost::price_kernel(d, big, "fp32");
  EXPECT_EQ(source, cost::PriceSource::Roofline);
  EXPECT_DOUBLE_EQ(s, cost::kernel_time(d, big, "fp32"));
  // A table measured in another precision does not price this one.
  EXPECT_EQ(cost::price_kernel(d, square(64), "bf16").second, cost::PriceSource::Roofline);
}

TEST(KernelTable, RoundTripsAndRejectsBadEntries) {
  auto t = table();
  t.provenance = {{"device", "cpu"}};
  auto back = cost::KernelTable::from_json(t.to_json(), "t.json");
  EXPECT_EQ(back.gemms.size(), 2u);
  auto j = t.to_json();
  j["gemm"][1]["seconds"] = -1;
  try {
    cost::KernelTable::from_json(j, "t.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.pointer(), "/gemm/1/seconds");
  }
}

TEST(DeviceProfiles, CpuProfileCarriesItsMeasuredTable) {
  auto d = config::load_device_profile("cpu-epyc-2core");
  ASSERT_TRUE(d.kernels);
  EXPECT_EQ(d.kernels->provenance["device"], "cpu");
  EXPECT_GT(d.kernels->gemms.size(), 10u);
}

TEST(EfficiencyCurve, MeasuredPointsAreFollowedLogLinearly) {
  cost::EfficiencyCurve c{0.8, 1e9, {{1e9, 0.4}, {1e11, 0.6}, {1e13, 0.7}}};
  EXPECT_DOUBLE_EQ(c.at(1e11), 0.6);
  EXPECT_NEAR(c.at(1e10), 0.5, 1e-12);  // halfway in log size between 1e9 and 1e11
  EXPECT_DOUBLE_EQ(c.at(1e15), 0.7);    // flat above the largest measurement
  // Below the smallest point the smooth curve's shape, scaled to meet the point.
  EXPECT_NEAR(c.at(1e8), 0.4 * (1e8 / (1e8 + 1e9)) / (1e9 / (2e9)), 1e-12);
}

namespace {
// Loads a copy of the A100 profile whose GEMM points are `points`, from a scratch data directory.
std::string device_error(const std::string& points) {
  test::TempDir dir;
  std::ifstream in(test::source_dir() + "/hardware_profiles/a100-sxm-80gb.json");
  auto doc = nlohmann::json::parse(in);
  doc["gemm_efficiency"]["points"] = nlohmann::json::parse(points);
  dir.file("hardware_profiles/bad.json", doc.dump());
  setenv("DTSIM_HOME", dir.path().c_str(), 1);
  std::string msg;
  try {
    config::load_device_profile("bad");
  } catch (const InputError& e) {
    msg = e.what();
  }
  unsetenv("DTSIM_HOME");
  return msg;
}
}  // namespace

TEST(EfficiencyCurve, BadMeasuredPointsAreInputErrors) {
  for (const char* bad : {"[]", "[[1e9, 0.5], [1e8, 0.6]]", "[[1e9, 1.5]]", "[[1e9, 0]]", "[[-1, 0.5]]", "[1e9]"})
    EXPECT_NE(device_error(bad).find("points"), std::string::npos) << bad;
  EXPECT_EQ(device_error("[[1e9, 0.5], [1e12, 0.7]]"), "");
}

namespace {
// Forward + backward TFLOP/s of one attention, as flash-attention's benchmark script counts them
// (3.5 x 4 b s^2 heads d): b 2, s 8192, 32 heads of 64, fp16, no dropout, not causal.
double attention_tflops(const cost::DeviceProfile& d, models::Attention kind) {
  models::TransformerSpec s;
  s.num_layers = 1;
  s.hidden_size = 2048;
  s.num_heads = 32;
  s.seq_len = 8192;
  s.vocab_size = 64;
  s.dropout = false;
  models::BuildOptions o;
  o.micro_batch = 2;
  o.attention = kind;
  const auto g = models::build_transformer(s, o);
  double seconds = 0;
  for (const auto& layer : g.layers)
    for (const auto& op : layer.ops)
      if ((op.name.rfind("attention.", 0) == 0 && op.name != "attention.out" && op.name != "attention.residual") ||
          op.name == "flash_attention")
        for (const auto* pass : {&op.forward, &op.backward})
          for (const auto& k : *pass) seconds += cost::kernel_time(d, k, "fp16");
  return 3.5 * 4.0 * 2 * 8192.0 * 8192.0 * 32 * 64 / seconds / 1e12;
}
}  // namespace

TEST(DeviceProfiles, A100AttentionMatchesAzuresPublishedBenchmark) {
  // Azure/AI-benchmarking-guide, ND A100 v4: PyTorch standard attention 46.0 TFLOP/s, Flash
  // Attention 2 179.5 TFLOP/s, forward + backward, on the configuration above.
  const auto a100 = config::load_device_profile("a100-sxm-80gb");
  EXPECT_NEAR(attention_tflops(a100, models::Attention::Standard), 46.0, 46.0 * 0.02);
  EXPECT_NEAR(attention_tflops(a100, models::Attention::Flash), 179.5, 179.5 * 0.02);
  auto roofline = a100;
  roofline.scores_memory_efficiency = roofline.flash_attention_efficiency = 1.0;
  std::printf("uncalibrated: standard %.2f flash %.2f TFLOP/s\n", attention_tflops(roofline, models::Attention::Standard),
              attention_tflops(roofline, models::Attention::Flash));
}

TEST(Collectives, DgxA100AllReduceFollowsNcclTests) {
  // Azure's nccl-tests all-reduce on 8 A100s (busbw, GB/s): the preset's size-dependent
  // efficiency reproduces mid-size buffers, where NCCL is far from line rate, and large ones.
  test::TempDir dir;
  const auto s = config::load_scenario(dir.file("s.json", R"({"schema_version": 1, "name": "t", "model": {"preset": "gpt2"},
      "hardware": {"device": "a100-sxm-80gb"}, "cluster": {"preset": "dgx-a100", "nodes": 1},
      "parallelism": {"data": 8, "micro_batch_size": 4}, "training": {"global_batch_size": 64}})"));
  const network::Platform pf(s.cluster);
  const std::vector<int> ranks{0, 1, 2, 3, 4, 5, 6, 7};
  for (auto [bytes, busbw] : {std::pair{4194304.0, 71.43}, {134217728.0, 174.18}, {2147483648.0, 230.22}}) {
    const double t = network::analytical_time(
        pf, network::lower(pf, taskgraph::CollectiveOp::AllReduce, taskgraph::Algorithm::Ring, bytes, ranks));
    EXPECT_NEAR(1.75 * bytes / t / 1e9, busbw, busbw * 0.01) << bytes;
  }
  // Across nodes the table does not apply: one GPU on each of two nodes takes what NCCL's model
  // predicts, the ring's Simple protocol on one channel at 24 GB/s (tests/test_nccl_tuning.cpp),
  // more than the line rate's S / 25 GB/s + 2 x 5 us.
  const std::vector<int> across{0, 8};
  network::ClusterSpec two = s.cluster;
  two.nodes = 2;
  const network::Platform pf2(two);
  const double t = network::analytical_time(
      pf2, network::lower(pf2, taskgraph::CollectiveOp::AllReduce, taskgraph::Algorithm::Ring, 134217728.0, across));
  EXPECT_NEAR(t, 134217728.0 / 24e9 + (8.4 + 2 * 14.0) * 1.4e-6, 1e-7);
}
