// Issue 27 item 1 (presets): AMD MI300X/MI355X, NVIDIA B300/GB300, Google TPU v5p/v6e and the older
// seeds' Tesla P40 and TPU v2 as device presets, with their cluster presets. Every number a profile
// gives is cited in its "sources"; the peaks asserted here are the datasheets' dense figures.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "run_dtsim.hpp"
#include "sim/config/scenario.hpp"
#include "sim/core/paths.hpp"
#include "sim/cost/roofline.hpp"

namespace {

using dtsim::test::run_dtsim;
using dtsim::test::slurp;
using dtsim::test::TempDir;

constexpr double kGiB = 1024.0 * 1024 * 1024;
const char* const kDevices[] = {"mi300x", "mi355x", "b300", "gb300", "tpu-v5p", "tpu-v6e", "tpu-v2", "p40"};
// Each new cluster preset and the shipped scenario that runs it.
const std::pair<const char*, const char*> kClusters[] = {
    {"mi300x-platform", "systems/llama-3-8b-mi300x.json"}, {"mi355x-platform", "systems/llama-3-8b-mi355x.json"},
    {"gb300-nvl72", "systems/llama-3-8b-gb300-nvl72.json"}, {"tpu-v5p-pod", "cnn/tpu-v5p-128-resnet50.json"},
    {"tpu-v6e-pod", "cnn/tpu-v6e-16-resnet50.json"},        {"tpu-v2-pod", "cnn/tpu-v2-32-resnet50.json"},
    {"p40-pcie", "cnn/p40-8-resnet50.json"}};

nlohmann::json profile_json(const std::string& rel) {
  return nlohmann::json::parse(slurp(dtsim::test::source_dir() + "/hardware_profiles/" + rel + ".json"));
}

// A square GEMM of side n, as the cost model sees one.
dtsim::models::Kernel square_gemm(std::int64_t n, bool fp8) {
  dtsim::models::Kernel k;
  k.kind = dtsim::models::KernelKind::Gemm;
  k.m = k.n = k.k = n;
  k.flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  k.bytes = 3.0 * static_cast<double>(n * n) * 2.0;
  k.fp8 = fp8;
  return k;
}

// TFLOP/s of a large (16384^3) GEMM on a device preset.
double large_gemm_tflops(const std::string& device, bool fp8) {
  const auto d = dtsim::config::load_device_profile(device);
  const auto k = square_gemm(16384, fp8);
  return k.flops / dtsim::cost::kernel_time(d, k, "bf16") / 1e12;
}

TEST(DevicePresets, EveryNewDeviceLoadsAndCitesEveryNumber) {
  for (const char* name : kDevices) {
    const auto d = dtsim::config::load_device_profile(name);
    EXPECT_EQ(d.name, name);
    EXPECT_GT(d.peak_flops.at("fp32"), 0.0) << name;
    const auto doc = profile_json(name);
    for (const auto& [key, value] : doc.items()) {
      if (key == "name" || key == "description" || key == "sources") continue;
      const auto& sources = doc.at("sources");
      EXPECT_TRUE(sources.contains(key) && sources[key].get<std::string>().size() > 40) << name << ": " << key << " uncited";
    }
  }
}

TEST(DevicePresets, AmdPeaksAreTheDatasheets) {
  // AMD MI300X data sheet: dense FP16/BF16 1307.4, FP8 2614.9 TFLOP/s; 192 GB HBM3 at 5.3 TB/s; 750 W.
  const auto mi300x = dtsim::config::load_device_profile("mi300x");
  EXPECT_DOUBLE_EQ(mi300x.peak_flops.at("bf16"), 1307.4e12);
  EXPECT_DOUBLE_EQ(mi300x.peak_flops.at("fp8"), 2614.9e12);
  EXPECT_DOUBLE_EQ(mi300x.hbm_bandwidth, 5.3e12);
  EXPECT_DOUBLE_EQ(mi300x.memory_bytes, 192 * kGiB);  // ROCm gpu-specs table, VRAM 192 GiB
  EXPECT_DOUBLE_EQ(mi300x.power_w, 750);
  // MI355X: 256 CUs x 8192 FP8 FLOPs per clock x 2.4 GHz = 5033.2 TFLOP/s; BF16 half; 288 GB at 8 TB/s; 1,400 W.
  const auto mi355x = dtsim::config::load_device_profile("mi355x");
  EXPECT_DOUBLE_EQ(mi355x.peak_flops.at("fp8"), 5033.2e12);
  EXPECT_DOUBLE_EQ(mi355x.peak_flops.at("bf16"), 2516.6e12);
  EXPECT_FALSE(mi355x.peak_flops.contains("tf32"));  // CDNA 4 has no TF32 matrix path
  EXPECT_DOUBLE_EQ(mi355x.hbm_bandwidth, 8e12);
  EXPECT_DOUBLE_EQ(mi355x.memory_bytes, 288 * kGiB);
  EXPECT_DOUBLE_EQ(mi355x.power_w, 1400);
}

TEST(DevicePresets, BlackwellUltraPeaksAreTheDatasheets) {
  // HGX B300 dense: BF16 2250, FP8 4500 TFLOP/s (Lockwood; Verda); nvidia-smi 275040 MiB.
  const auto b300 = dtsim::config::load_device_profile("b300");
  EXPECT_DOUBLE_EQ(b300.peak_flops.at("bf16"), 2250e12);
  EXPECT_DOUBLE_EQ(b300.peak_flops.at("fp8"), 4500e12);
  EXPECT_NEAR(b300.memory_bytes, 275040.0 * 1024 * 1024, 1e6);
  // GB300: BF16 2500, FP8 5000, FP4 15000 (GB300 NVL72 rack: 1080 PF dense FP4 / 72); 8 TB/s; 1,400 W.
  const auto gb300 = dtsim::config::load_device_profile("gb300");
  EXPECT_DOUBLE_EQ(gb300.peak_flops.at("bf16"), 2500e12);
  EXPECT_DOUBLE_EQ(gb300.peak_flops.at("fp4"), 15000e12);
  EXPECT_DOUBLE_EQ(gb300.hbm_bandwidth, 8e12);
  EXPECT_NEAR(gb300.memory_bytes, 256703.0 * 1024 * 1024, 1e6);  // nvidia-smi 256703 MiB
  EXPECT_DOUBLE_EQ(gb300.power_w, 1400);
  // Grace-hosted: NVLink-C2C 900 GB/s bidirectional shared by two GPUs, not PCIe.
  EXPECT_DOUBLE_EQ(gb300.pcie_bandwidth, 225e9);
}

TEST(DevicePresets, TpuAndPascalPeaksAreTheDatasheets) {
  // Cloud TPU v5p: 459 TFLOP/s bf16, 95 GiB HBM2e at 2765 GB/s.
  const auto v5p = dtsim::config::load_device_profile("tpu-v5p");
  EXPECT_DOUBLE_EQ(v5p.peak_flops.at("bf16"), 459e12);
  EXPECT_DOUBLE_EQ(v5p.memory_bytes, 95 * kGiB);
  EXPECT_DOUBLE_EQ(v5p.hbm_bandwidth, 2765e9);
  // Cloud TPU v6e: 918 TFLOP/s bf16, 32 GB at 1638 GB/s.
  const auto v6e = dtsim::config::load_device_profile("tpu-v6e");
  EXPECT_DOUBLE_EQ(v6e.peak_flops.at("bf16"), 918e12);
  EXPECT_NEAR(v6e.memory_bytes, 32e9, 1e6);
  EXPECT_DOUBLE_EQ(v6e.hbm_bandwidth, 1638e9);
  // TPU v2 (Jouppi et al., CACM 2020, Table 3): 46 TFLOP/s, 16 GiB, 700 GB/s.
  const auto v2 = dtsim::config::load_device_profile("tpu-v2");
  EXPECT_DOUBLE_EQ(v2.peak_flops.at("bf16"), 46e12);
  EXPECT_DOUBLE_EQ(v2.memory_bytes, 16 * kGiB);
  // Tesla P40 datasheet: 12 TFLOP/s FP32, 24 GB GDDR5 at 346 GB/s, PCIe Gen3 x16; FP16 at 1/64 rate.
  const auto p40 = dtsim::config::load_device_profile("p40");
  EXPECT_DOUBLE_EQ(p40.peak_flops.at("fp32"), 12e12);
  EXPECT_DOUBLE_EQ(p40.peak_flops.at("fp16"), 12e12 / 64);
  EXPECT_DOUBLE_EQ(p40.hbm_bandwidth, 346e9);
  EXPECT_DOUBLE_EQ(p40.pcie_bandwidth, 16e9);
  EXPECT_FALSE(p40.peak_flops.contains("bf16"));
}

// A large GEMM reaches the published best-shape torch.mm ceiling (microbench gemm.json rows).
TEST(DevicePresets, LargeGemmsReachThePublishedMatmulCeilings) {
  EXPECT_NEAR(large_gemm_tflops("mi300x", false), 668.4, 0.02 * 668.4);   // gemm-008
  EXPECT_NEAR(large_gemm_tflops("mi300x", true), 1273, 0.02 * 1273);      // gemm-048 (hipBLASLt)
  EXPECT_NEAR(large_gemm_tflops("mi355x", false), 1565, 0.02 * 1565);     // gemm-010
  EXPECT_NEAR(large_gemm_tflops("b300", false), 1769, 0.02 * 1769);       // gemm-006
  EXPECT_NEAR(large_gemm_tflops("b300", true), 3353.3, 0.02 * 3353.3);    // gemm-015
}

TEST(DevicePresets, EachNewClusterRunsItsScenarioEndToEnd) {
  for (const auto& [preset, scenario] : kClusters) {
    TempDir dir;
    const std::string file = dtsim::test::source_dir() + "/scenarios/" + scenario;
    EXPECT_EQ(nlohmann::json::parse(slurp(file)).at("cluster").at("preset"), preset) << scenario;
    const auto r = run_dtsim({"run", file, "-o", dir.path("out")}, dir);
    ASSERT_EQ(r.code, 0) << scenario << ": " << r.err;
    const auto j = nlohmann::json::parse(slurp(dir.path("out/result.json")));
    const double step = j.at("step_time_s").get<double>();
    ASSERT_GT(step, 0.0) << scenario;
    double sum = 0;
    for (const auto& [part, value] : j.at("breakdown_s").items()) sum += value.get<double>();
    EXPECT_NEAR(sum, step, 1e-9 * step) << scenario;
  }
}

TEST(DevicePresets, ListNamesEveryNewPreset) {
  TempDir dir;
  const auto devices = run_dtsim({"list", "devices"}, dir);
  ASSERT_EQ(devices.code, 0) << devices.err;
  for (const char* name : kDevices) EXPECT_NE(devices.out.find(std::string("\n") + name + " "), std::string::npos) << name;
  EXPECT_NE(devices.out.find("1307.4 TFLOP/s bf16"), std::string::npos) << devices.out;  // MI300X
  const auto clusters = run_dtsim({"list", "clusters"}, dir);
  ASSERT_EQ(clusters.code, 0) << clusters.err;
  for (const auto& [preset, scenario] : kClusters) EXPECT_NE(clusters.out.find(preset), std::string::npos) << preset;
}

// nccl-tests style bus bandwidth (GB/s) of an all-reduce of `size` over one node of a preset.
double one_node_busbw(const std::string& preset, const std::string& device, int gpus, const std::string& size) {
  TempDir dir;
  const std::string scenario = dir.file("s.json", R"({"schema_version": 1, "name": "c", "model": {"preset": "gpt2"},
    "hardware": {"device": ")" + device + R"("}, "cluster": {"preset": ")" + preset + R"(", "nodes": 1},
    "parallelism": {"data": )" + std::to_string(gpus) + R"(}, "training": {"global_batch_size": 64, "precision": "fp32"}})");
  const auto r = run_dtsim({"collective", "--op", "all_reduce", "--gpus", std::to_string(gpus), "--scenario", scenario, "-b", size,
                            "-e", size, "--format", "json"},
                           dir);
  EXPECT_EQ(r.code, 0) << r.err;
  if (r.code != 0) return 0;
  return nlohmann::json::parse(r.out).at("rows").at(0).at("busbw_GBps").get<double>();
}

// The Infinity Fabric mesh is modelled at its aggregate, 7 links x 64 GB/s per direction per GPU
// (a large 8-GPU all-reduce uses all of them), and RCCL is not modelled: no NCCL tuning model.
TEST(DevicePresets, InfinityFabricMeshAllReducesAtItsAggregateLinkBandwidth) {
  const double b = one_node_busbw("mi300x-platform", "mi300x", 8, "4G");
  EXPECT_GT(b, 0.9 * 448);
  EXPECT_LE(b, 448 * 1.0001);
  for (const char* amd : {"clusters/mi300x-platform", "clusters/mi355x-platform"}) {
    const auto doc = profile_json(amd);
    EXPECT_FALSE(doc.at("cluster").at("inter_node").contains("nccl")) << amd;
    EXPECT_NE(doc.at("description").get<std::string>().find("RCCL"), std::string::npos) << amd;
  }
}

// Eight P40s behind non-blocking PCIe switches: a ring all-reduce runs at one Gen3 x16 link, 16 GB/s
// per direction (at the pcie fabric's default bridge, one link's worth shared by 8 GPUs, it was 2).
TEST(DevicePresets, P40NodeAllReducesAtItsPcieGen3Link) {
  const double b = one_node_busbw("p40-pcie", "p40", 8, "1G");
  EXPECT_GT(b, 0.9 * 16);
  EXPECT_LE(b, 16 * 1.0001);
}

}  // namespace
