// Issue 15 items 1-3: the CPU kernels' ISA, the timing protocol (median, spread, load, noisy
// tables), element-wise kinds and the launch overhead, and the band they put on a step time.
// Nothing here asserts how fast this machine is, so a busy machine cannot fail it.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>

#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "sim/cost/roofline.hpp"
#include "sim/profile/cpu_loader.hpp"
#include "sim/profile/cpu_profiler.hpp"
#include "sim/profile/timing_stats.hpp"
#include "sim/results/result.hpp"

using namespace dtsim;

TEST(TimingStats, MedianAndRobustSpread) {
  // Median 3; absolute deviations 2, 1, 0, 1, 97 have median 1: the outlier does not count.
  auto t = profile::summarize({4, 1, 100, 3, 2});
  EXPECT_DOUBLE_EQ(t.median, 3);
  EXPECT_NEAR(t.spread, 1.4826 / 3, 1e-12);
  EXPECT_EQ(t.runs, 5);
  // An even count takes the mean of the middle two.
  EXPECT_DOUBLE_EQ(profile::summarize({1, 2, 3, 10}).median, 2.5);
  EXPECT_DOUBLE_EQ(profile::summarize({5, 5, 5}).spread, 0);
  EXPECT_THROW(profile::summarize({}), std::invalid_argument);
}

TEST(TimingStats, SamplesUntilSteadyOrOutOfBudget) {
  profile::Protocol p;
  p.min_runs = 5;
  p.max_runs = 50;
  p.target_spread = 0.05;
  p.budget_s = 1.0;
  const std::vector<double> steady{1.00, 1.01, 0.99, 1.00, 1.02};
  const std::vector<double> noisy{1.0, 1.6, 0.7, 1.3, 2.0};
  EXPECT_FALSE(profile::enough(p, {1.0, 1.0, 1.0}, 0.1));  // fewer than min_runs
  EXPECT_TRUE(profile::enough(p, steady, 0.1));
  EXPECT_FALSE(profile::enough(p, noisy, 0.1));  // keeps sampling
  EXPECT_TRUE(profile::enough(p, noisy, 1.0));   // the budget is spent
  EXPECT_TRUE(profile::enough(p, std::vector<double>(50, 1.0), 0.0));
}

TEST(TimingStats, ColdSamplesKeepTheProtocol) {
  // With eviction the sweep runs before every sample, outside its time: the protocol still
  // stops on its own rules and counts only the kernel's runs.
  profile::Protocol p;
  p.warmup = 1;
  p.min_runs = 4;
  p.max_runs = 6;
  p.target_spread = -1;  // never steady (a spread is never negative): sampling stops at max_runs
  p.budget_s = 60;
  p.evict_bytes = 4 << 20;
  std::int64_t runs = 0;
  const auto t = profile::measure(p, [&](std::int64_t times) { runs += times; });
  EXPECT_EQ(t.runs, 6);
  EXPECT_GE(runs, 1 + 1 + 6);  // warm-up, the first timing, six samples
  // The cache size the eviction is sized from, where sysfs describes the caches.
  const double llc = profile::last_level_cache_bytes();
  EXPECT_GE(llc, 0.0);
  if (std::ifstream("/sys/devices/system/cpu/cpu0/cache/index0/size")) {
    EXPECT_GT(llc, 0.0);
  }
}

TEST(TimingStats, NoisyTimingsOrABusyMachineFlagTheTable) {
  auto timing = [](double spread) {
    profile::Timing t;
    t.median = 1e-3;
    t.spread = spread;
    return t;
  };
  std::vector<profile::Timing> quiet(20, timing(0.01));
  EXPECT_FALSE(profile::judge(quiet, 0.05, 0.1, 2, 2).noisy());
  // One entry of 20 over the target is tolerated; three are not.
  quiet[0] = timing(0.5);
  EXPECT_FALSE(profile::judge(quiet, 0.05, 0.1, 2, 2).noisy());
  auto series = quiet;
  series[1] = series[2] = timing(0.3);
  auto noisy = profile::judge(series, 0.05, 0.1, 2, 2);
  ASSERT_TRUE(noisy.noisy());
  EXPECT_NE(noisy.reasons[0].find("3 of 20 timings spread more than 5%"), std::string::npos) << noisy.reasons[0];
  // Two other runnable processes on a 2-core machine the profile fills.
  auto busy = profile::judge(quiet, 0.05, 2.0, 2, 2);
  ASSERT_TRUE(busy.noisy());
  EXPECT_NE(busy.reasons[0].find("load average 2.00"), std::string::npos) << busy.reasons[0];
  EXPECT_FALSE(profile::judge(quiet, 0.05, 2.0, 8, 2).noisy());  // spare cores
  EXPECT_FALSE(profile::judge(quiet, 0.05, -1.0, 2, 2).noisy());  // load unknown
}

TEST(CpuKernels, ProvenanceNamesTheIsaTheKernelsWereBuiltFor) {
  const auto p = profile::cpu_provenance();
  ASSERT_TRUE(p.contains("isa"));
  const std::string isa = p["isa"];
  std::string missing;
  EXPECT_TRUE(profile::cpu::cpu_supports(isa, missing)) << missing;
#ifndef DTSIM_PORTABLE_PROFILE
  // Built with -march=native: the kernels use what this CPU has.
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    EXPECT_NE(isa.find("avx2+fma"), std::string::npos) << isa;
  }
  if (__builtin_cpu_supports("avx512f")) {
    EXPECT_NE(isa.find("avx512f"), std::string::npos) << isa;
  }
#endif
  EXPECT_GE(p["threads"].get<int>(), 1);
  EXPECT_EQ(p["eigen"].get<std::string>().rfind("3.", 0), 0u);
  EXPECT_FALSE(p["cpu_model"].get<std::string>().empty());
  EXPECT_GT(p["cpu_mhz"].get<double>(), 0);
  EXPECT_FALSE(p["compiler"].get<std::string>().empty());
  EXPECT_FALSE(p["simd"].get<std::string>().empty());
}

TEST(CpuKernels, AnIsaThisCpuLacksIsRefused) {
  std::string missing;
  EXPECT_TRUE(profile::cpu::cpu_supports("sse2", missing));
  EXPECT_FALSE(profile::cpu::cpu_supports("sse2+avx9000", missing));
  EXPECT_EQ(missing, "avx9000");
}

TEST(CpuKernels, ATableCarriesSpreadsLoadKindsAndTheLaunchOverhead) {
  profile::Options o;
  o.repeats = 3;
  o.budget_s = 0.02;  // a short profile: this checks what is recorded, not how well
  const std::vector<models::Kernel> kernels{
      {"mlp.fc1", models::KernelKind::Gemm, 1, 64, 128, 32, 2.0 * 64 * 128 * 32, 0},
      {"mlp.gelu", models::KernelKind::Memory, 1, 0, 0, 0, 10.0 * 8192, 8.0 * 8192},
      {"attention.softmax", models::KernelKind::Memory, 1, 0, 0, 0, 5.0 * 8192, 8.0 * 8192},
      {"norm1", models::KernelKind::Memory, 1, 0, 0, 0, 8.0 * 8192, 8.0 * 8192},
      {"attention.dropout", models::KernelKind::Memory, 1, 0, 0, 0, 2.0 * 8192, 8.0 * 8192},
      {"grad_accumulate", models::KernelKind::Memory, 1, 0, 0, 0, 1000, 12000}};
  const auto t = profile::profile_cpu(kernels, o);
  EXPECT_GT(t.launch_overhead_s, 0);
  for (const char* kind : {"gelu", "softmax", "layernorm", "dropout"}) {
    ASSERT_TRUE(t.elementwise.contains(kind)) << kind;
    bool listed = false;
    for (const auto& e : t.elementwise.at(kind)) listed |= e.bytes == 8.0 * 8192;
    EXPECT_TRUE(listed) << kind;  // the model's own size, besides the sweep
  }
  for (const auto& g : t.gemms) {
    EXPECT_GE(g.runs, 1);
    EXPECT_GE(g.spread, 0);
  }
  const auto& timing = t.provenance["timing"];
  EXPECT_EQ(timing["load"]["loadavg_before"].size(), 3u);
  EXPECT_GT(timing["load"]["wall_s"].get<double>(), 0);
  EXPECT_GT(timing["load"]["cpu_s"].get<double>(), 0);
  EXPECT_EQ(t.noisy, !timing["noisy_reasons"].empty());
  // Every kernel the model named is priced from the table, each kind from its own curve.
  for (const auto& k : kernels) EXPECT_EQ(t.quote(k)->source, cost::PriceSource::Exact) << k.name;
  for (const auto& e : t.elementwise.at("gelu"))
    if (e.bytes == 8.0 * 8192) {
      EXPECT_DOUBLE_EQ(t.quote(kernels[1])->seconds, e.seconds);
    }
}

namespace {

models::Kernel mem(const std::string& name, double bytes, double flops) {
  return {name, models::KernelKind::Memory, 1, 0, 0, 0, flops, bytes};
}

cost::KernelTable table() {
  cost::KernelTable t;
  t.gemms = {{1, 64, 64, 64, 1e-5, 0.10, 9}, {1, 1024, 1024, 1024, 2e-2, 0.02, 9}};
  t.memory = {{1e6, 1e-5, 0.04, 9}, {1e8, 2e-3, 0.0, 9}};
  t.elementwise["gelu"] = {{1e6, 4e-5, 0.08, 9}};
  t.elementwise["dropout"] = {{3e6, 9e-5, 0.0, 9}};
  return t;
}

cost::DeviceProfile device() {
  cost::DeviceProfile d;
  d.name = "toy";
  d.peak_flops = {{"fp32", 1e12}};
  d.hbm_bandwidth = 1e11;
  d.kernels = table();
  return d;
}

}  // namespace

TEST(KernelTableFormat, ElementwiseKernelsAreTimedAsTheirOwnKinds) {
  EXPECT_EQ(cost::elementwise_kind(mem("mlp.gelu", 1e6, 1e6)), "gelu");
  EXPECT_EQ(cost::elementwise_kind(mem("mlp.swiglu.bwd", 1e6, 1e6)), "gelu");
  EXPECT_EQ(cost::elementwise_kind(mem("attention.softmax.bwd", 1e6, 1e6)), "softmax");
  EXPECT_EQ(cost::elementwise_kind(mem("cross_entropy", 1e6, 1e6)), "softmax");
  EXPECT_EQ(cost::elementwise_kind(mem("final_norm", 1e6, 1e6)), "layernorm");
  EXPECT_EQ(cost::elementwise_kind(mem("embedding.dropout", 1e6, 1e6)), "dropout");
  // models/transformer.cpp's residual add: 3 FLOPs per element with dropout, 1 without.
  EXPECT_EQ(cost::elementwise_kind(mem("mlp.residual", 3 * 4 * 1000, 3 * 1000)), "dropout");
  EXPECT_EQ(cost::elementwise_kind(mem("mlp.residual", 3 * 4 * 1000, 1000)), "");
  EXPECT_EQ(cost::elementwise_kind(mem("mlp.residual.bwd", 5 * 2 * 1000, 2 * 1000)), "");
  EXPECT_EQ(cost::elementwise_kind(mem("mlp.residual.bwd", 5 * 2 * 1000, 6 * 1000)), "dropout");
  EXPECT_EQ(cost::elementwise_kind(mem("grad_accumulate", 1e6, 1e6)), "");
  EXPECT_EQ(cost::elementwise_kind({"mlp.gelu", models::KernelKind::Gemm, 1, 8, 8, 8, 1024, 0}), "");

  const auto t = table();
  auto gelu = t.quote(mem("mlp.gelu", 1e6, 1e7));
  ASSERT_TRUE(gelu);
  EXPECT_DOUBLE_EQ(gelu->seconds, 4e-5);  // not the stream's 1e-5
  EXPECT_DOUBLE_EQ(gelu->spread, 0.08);
  // A kind measured at other sizes only: the streams' curve prices it.
  auto off = t.quote(mem("attention.dropout", 1e7, 1e6));
  ASSERT_TRUE(off);
  EXPECT_NEAR(off->seconds, 1e7 / std::sqrt(1e6 / 1e-5 * 1e8 / 2e-3), 1e-12);
  // Interpolated spreads follow the curve: halfway between 0.10 and 0.02 in log(FLOPs).
  auto mid = t.quote({"g", models::KernelKind::Gemm, 1, 256, 256, 256, 2.0 * 256 * 256 * 256, 0});
  ASSERT_TRUE(mid);
  EXPECT_NEAR(mid->spread, 0.06, 1e-12);
}

TEST(KernelTableFormat, FlashAttentionRunsAtItsShapesRateOverItsOwnFlops) {
  // The GPU profiler times flash attention as the GEMM of its shape (b*h, s, s, d): one product,
  // where the forward does two (QK^T, PV) and the backward five.
  cost::KernelTable t;
  t.dtype = "bf16";
  t.gemms = {{16, 1024, 1024, 64, 1e-4}};
  const double one = 2.0 * 16 * 1024 * 1024 * 64;
  const models::Kernel fwd{"flash_attention", models::KernelKind::Attention, 16, 1024, 1024, 64, 2 * one, 0};
  const models::Kernel bwd{"flash_attention.bwd", models::KernelKind::Attention, 16, 1024, 1024, 64, 5 * one, 0};
  const models::Kernel qk{"attention.qk", models::KernelKind::Attention, 16, 1024, 1024, 64, one, 0};
  EXPECT_DOUBLE_EQ(t.quote(fwd)->seconds, 2e-4);
  EXPECT_DOUBLE_EQ(t.quote(bwd)->seconds, 5e-4);
  EXPECT_DOUBLE_EQ(t.quote(qk)->seconds, 1e-4);  // a plain GEMM: its measured time
  EXPECT_EQ(t.quote(bwd)->source, cost::PriceSource::Exact);
}

TEST(KernelTableFormat, OldTablesStillLoad) {
  // As written before spreads, element-wise kinds, launch overhead and the noisy flag.
  const auto old = nlohmann::json::parse(R"({"provenance": {"device": "cpu"}, "dtype": "fp32",
      "gemm": [{"batch": 1, "m": 64, "n": 64, "k": 64, "seconds": 1e-5}],
      "memory": [{"bytes": 4096, "seconds": 1e-7}]})");
  const auto t = cost::KernelTable::from_json(old, "old.json");
  ASSERT_EQ(t.gemms.size(), 1u);
  EXPECT_DOUBLE_EQ(t.gemms[0].spread, 0);
  EXPECT_DOUBLE_EQ(t.memory[0].spread, 0);
  EXPECT_TRUE(t.elementwise.empty());
  EXPECT_DOUBLE_EQ(t.launch_overhead_s, 0);
  EXPECT_FALSE(t.noisy);
  // The new fields survive a round trip.
  auto n = table();
  n.launch_overhead_s = 3e-6;
  n.noisy = true;
  n.provenance = {{"device", "cpu"}};
  const auto back = cost::KernelTable::from_json(n.to_json(), "new.json");
  EXPECT_DOUBLE_EQ(back.launch_overhead_s, 3e-6);
  EXPECT_TRUE(back.noisy);
  EXPECT_DOUBLE_EQ(back.gemms[0].spread, 0.10);
  EXPECT_EQ(back.gemms[0].runs, 9);
  EXPECT_DOUBLE_EQ(back.elementwise.at("gelu")[0].seconds, 4e-5);
  // An element-wise kind dtsim does not know is an error at its pointer.
  auto bad = n.to_json();
  bad["elementwise"]["gelo"] = bad["elementwise"]["gelu"];
  try {
    cost::KernelTable::from_json(bad, "bad.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.pointer(), "/elementwise/gelo");
  }
}

TEST(LaunchOverhead, IsPricedForEveryKernel) {
  auto d = device();
  const models::Kernel gemm{"g", models::KernelKind::Gemm, 1, 64, 64, 64, 2.0 * 64 * 64 * 64, 0};
  const models::Kernel huge{"g", models::KernelKind::Gemm, 1, 8192, 8192, 8192, 2.0 * 8192 * 8192 * 8192, 0};
  const double roofline = cost::kernel_time(d, huge, "fp32");
  EXPECT_DOUBLE_EQ(cost::price_kernel(d, gemm, "fp32").first, 1e-5);
  d.kernels->launch_overhead_s = 4e-6;  // measured with the table
  EXPECT_DOUBLE_EQ(cost::price_kernel(d, gemm, "fp32").first, 1e-5 + 4e-6);
  EXPECT_DOUBLE_EQ(cost::price_kernel(d, huge, "fp32").first, roofline + 4e-6);  // the roofline's too
  d.launch_overhead_s = 2e-6;  // the device profile's key wins
  EXPECT_DOUBLE_EQ(cost::price_kernel(d, gemm, "fp32").first, 1e-5 + 2e-6);
  EXPECT_DOUBLE_EQ(cost::launch_overhead(d, "bf16"), 2e-6);
  d.launch_overhead_s.reset();
  EXPECT_DOUBLE_EQ(cost::launch_overhead(d, "bf16"), 0);  // a table of another dtype prices nothing
}

TEST(LaunchOverhead, DefaultsToZeroForTheShippedGpuProfiles) {
  for (const char* name : {"a100-sxm-80gb", "h100-sxm-80gb"}) {
    const auto d = config::load_device_profile(name);
    EXPECT_DOUBLE_EQ(cost::launch_overhead(d, "bf16"), 0) << name;
  }
}

namespace {
config::Scenario cpu_scenario() {
  auto s = config::load_scenario(std::string(DTSIM_SOURCE_DIR) + "/scenarios/cpu/tiny-gpt-cpu.json");
  s.backend = config::Backend::Analytical;
  return s;
}
}  // namespace

TEST(StepTimeBand, ComesFromTheTablesSpreads) {
  auto s = cpu_scenario();
  const auto plain = results::to_json(results::simulate(s), false);
  // The shipped table predates spreads: a zero band.
  EXPECT_DOUBLE_EQ(plain["compute_source"]["spread"].get<double>(), 0);
  for (auto& g : s.device.kernels->gemms) g.spread = 0.10;
  for (auto& m : s.device.kernels->memory) m.spread = 0.10;
  const auto r = results::simulate(s);
  const auto j = results::to_json(r, false);
  const double share = j["compute_source"]["measured_share"], spread = j["compute_source"]["spread"];
  // Every measured kernel spreads 10%; the roofline-priced rest does not.
  EXPECT_NEAR(spread, 0.10 * share, 1e-9);
  EXPECT_GT(spread, 0.09);
  EXPECT_NEAR(j["compute_source"]["step_time_low_s"].get<double>(), r.step_time_s * (1 - spread), 1e-12);
  EXPECT_NEAR(j["compute_source"]["step_time_high_s"].get<double>(), r.step_time_s * (1 + spread), 1e-12);
  // Deterministic: the band is the table's, not a new measurement.
  EXPECT_EQ(results::to_json(results::simulate(s), false).dump(), j.dump());
  EXPECT_FALSE(j.contains("warnings") && j["warnings"].dump().find("noisy") != std::string::npos);
}

TEST(StepTimeBand, ANoisyTableWarns) {
  auto s = cpu_scenario();
  s.device.kernels->noisy = true;
  const auto r = results::simulate(s);
  bool warned = false;
  for (const auto& w : r.warnings) warned |= w.find("noisy") != std::string::npos;
  EXPECT_TRUE(warned);
  EXPECT_TRUE(results::to_json(r, false)["compute_source"]["noisy_table"].get<bool>());
}

TEST(StepTimeBand, LaunchOverheadLengthensTheStep) {
  auto s = cpu_scenario();
  const double before = results::simulate(s).step_time_s;
  s.device.launch_overhead_s = 1e-4;
  const auto r = results::simulate(s);
  EXPECT_GT(r.step_time_s, before);
  EXPECT_DOUBLE_EQ(results::to_json(r, false)["compute_source"]["launch_overhead_us"].get<double>(), 100);
}
