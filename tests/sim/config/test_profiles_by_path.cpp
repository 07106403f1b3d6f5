// A user's own device profile and cluster or model preset, named by a path from the scenario
// (issue 27): same schema as the shipped ones, errors naming the user's file, and the same
// folder rule as `extends`.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>

#include "helpers.hpp"
#include "run_dtsim.hpp"

namespace {

using dtsim::test::run_dtsim;
using dtsim::test::slurp;
using dtsim::test::TempDir;
const std::string kSource = DTSIM_SOURCE_DIR;

std::string scenario(const std::string& device, const std::string& cluster) {
  return R"({"schema_version": 1, "name": "mine", "model": {"preset": "gpt2"}, "cluster": {"preset": ")" + cluster +
         R"(", "nodes": 1}, "hardware": {"device": ")" + device +
         R"("}, "parallelism": {"data": 8, "micro_batch_size": 8}, "training": {"global_batch_size": 64, "steps": 10},
         "simulation": {"backend": "analytical"}})";
}

double step_time(const dtsim::test::Outcome& r) { return nlohmann::json::parse(r.out)["step_time_s"].get<double>(); }

TEST(ProfilesByPath, ACopyOfAShippedDeviceGivesTheShippedResult) {
  TempDir dir;
  auto device = nlohmann::json::parse(slurp(kSource + "/hardware_profiles/a100-sxm-80gb.json"));
  device["name"] = "my-a100";
  dir.file("hw/my-a100.json", device.dump(2));
  const auto mine = run_dtsim({"run", dir.file("s.json", scenario("hw/my-a100.json", "dgx-a100")), "--format", "json"}, dir);
  ASSERT_EQ(mine.code, 0) << mine.err;
  const auto shipped = run_dtsim({"run", dir.file("t.json", scenario("a100-sxm-80gb", "dgx-a100")), "--format", "json"}, dir);
  ASSERT_EQ(shipped.code, 0) << shipped.err;
  EXPECT_EQ(step_time(mine), step_time(shipped));
  EXPECT_EQ(nlohmann::json::parse(mine.out)["compute_source"]["device"], "my-a100");
  // Half the HBM bandwidth and half the peaks: a slower step, so the file is what ran.
  device["hbm_bandwidth_GBps"] = device["hbm_bandwidth_GBps"].get<double>() / 2;
  for (auto& [dtype, v] : device["peak_tflops"].items()) v = v.get<double>() / 2;
  dir.file("hw/my-a100.json", device.dump(2));
  const auto slower = run_dtsim({"run", dir.path("s.json"), "--format", "json"}, dir);
  ASSERT_EQ(slower.code, 0) << slower.err;
  EXPECT_GT(step_time(slower), 1.5 * step_time(shipped));
}

TEST(ProfilesByPath, AnErrorInTheUsersFileNamesThatFileAndItsPointer) {
  TempDir dir;
  auto device = nlohmann::json::parse(slurp(kSource + "/hardware_profiles/a100-sxm-80gb.json"));
  device["hbm_bandwidth_GBps"] = -1;
  const std::string file = dir.file("p40.json", device.dump(2));
  const auto r = run_dtsim({"run", dir.file("s.json", scenario("./p40.json", "dgx-a100"))}, dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(file + ":/hbm_bandwidth_GBps"), std::string::npos) << r.err;
  const auto missing = run_dtsim({"run", dir.file("m.json", scenario("./p41.json", "dgx-a100"))}, dir);
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("/hardware/device: file \"./p41.json\" not found"), std::string::npos) << missing.err;
}

TEST(ProfilesByPath, AFileOutsideTheScenariosFolderNeedsAllowOutside) {
  TempDir dir;
  auto device = nlohmann::json::parse(slurp(kSource + "/hardware_profiles/a100-sxm-80gb.json"));
  dir.file("elsewhere/gpu.json", device.dump(2));
  const std::string s = dir.file("scenarios/s.json", scenario("../elsewhere/gpu.json", "dgx-a100"));
  const auto refused = run_dtsim({"run", s}, dir);
  EXPECT_EQ(refused.code, 2);
  EXPECT_NE(refused.err.find("outside this scenario's folder"), std::string::npos) << refused.err;
  const auto allowed = run_dtsim({"run", s, "--allow-outside", "-o", dir.path("out")}, dir);
  EXPECT_EQ(allowed.code, 0) << allowed.err;
  const auto proc = run_dtsim({"run", dir.file("p.json", scenario("/proc/self/environ", "dgx-a100")), "--allow-outside"}, dir);
  EXPECT_EQ(proc.code, 2);
  EXPECT_NE(proc.err.find("/proc or /sys"), std::string::npos) << proc.err;
}

TEST(ProfilesByPath, AClusterPresetFileGivesTheShippedPresetsResult) {
  TempDir dir;
  dir.file("my-cluster.json", slurp(kSource + "/hardware_profiles/clusters/dgx-a100.json"));
  const auto mine = run_dtsim({"run", dir.file("s.json", scenario("a100-sxm-80gb", "./my-cluster.json")), "--format", "json"}, dir);
  ASSERT_EQ(mine.code, 0) << mine.err;
  const auto shipped = run_dtsim({"run", dir.file("t.json", scenario("a100-sxm-80gb", "dgx-a100")), "--format", "json"}, dir);
  ASSERT_EQ(shipped.code, 0) << shipped.err;
  EXPECT_EQ(step_time(mine), step_time(shipped));
}

}  // namespace

TEST(ProfilesByPath, ListFilesNamesTheFileEachPresetIsReadFrom) {
  dtsim::test::TempDir dir;
  const auto r = dtsim::test::run_dtsim({"list", "devices", "--files"}, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string file = std::string(DTSIM_SOURCE_DIR) + "/hardware_profiles/b200.json";
  EXPECT_NE(r.out.find("[" + file + "]"), std::string::npos) << r.out;
  EXPECT_TRUE(std::filesystem::exists(file));
  // Without the flag the listing is as before: no paths.
  EXPECT_EQ(dtsim::test::run_dtsim({"list", "devices"}, dir).out.find("hardware_profiles/"), std::string::npos);
}
