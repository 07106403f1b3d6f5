// Issue 27 item 2: `dtsim calibrate` as a user runs it. Tables `dtsim collective` prints for a
// known cluster, and GEMM times from a known curve's closed form, fitted back to that profile;
// the written profiles named by path from scenarios; a real-layout nccl-tests log, a PyTorch
// trace and step times; deterministic bytes; all-or-nothing output; exit 2 on bad input.
#include <gtest/gtest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <sstream>

#include "helpers.hpp"
#include "run_dtsim.hpp"

namespace {

using dtsim::test::run_dtsim;
using dtsim::test::slurp;
using dtsim::test::TempDir;
using Json = nlohmann::json;
const std::string kSource = DTSIM_SOURCE_DIR;
const std::string kData = DTSIM_TEST_DATA "/calibrate";

// A cluster with round numbers, no efficiency curve and no NCCL floor (alpha-beta prices).
Json cluster_file(double intra_GBps, double intra_us, double nic_GBps, double inter_us) {
  return {{"description", "test cluster"},
          {"source", "made in the test"},
          {"cluster",
           {{"gpus_per_node", 8},
            {"intra_node", {{"fabric", "nvswitch"}, {"bandwidth_GBps", intra_GBps}, {"latency_us", intra_us}}},
            {"inter_node", {{"nics_per_node", 4}, {"nic_bandwidth_GBps", nic_GBps}, {"latency_us", inter_us}}}}}};
}

std::string scenario(const std::string& cluster, int nodes, const std::string& device = "h100-sxm-80gb") {
  return Json{{"schema_version", 1}, {"name", "s"}, {"model", {{"preset", "gpt2"}}},
              {"cluster", {{"preset", cluster}, {"nodes", nodes}}}, {"hardware", {{"device", device}}},
              {"parallelism", {{"data", 8 * nodes}, {"micro_batch_size", 4}}}, {"training", {{"global_batch_size", 32 * nodes}}},
              {"simulation", {{"backend", "analytical"}}}}
      .dump(2);
}

// The out-of-place time column of an nccl-tests table.
std::vector<double> times(const std::string& text) {
  std::vector<double> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream f(line);
    std::string cell;
    for (int i = 0; i < 6; ++i) f >> cell;
    out.push_back(std::stod(cell));
  }
  return out;
}

// `dtsim collective --format nccl-tests` for `op` on the scenario's cluster, into `file`.
void table(const TempDir& dir, const std::string& scenario_file, const std::string& op, const std::string& file) {
  const auto r = run_dtsim({"collective", "--scenario", scenario_file, "--op", op, "--format", "nccl-tests", "-b", "1K", "-e", "1G",
                            "-f", "4", "--analytical"},
                           dir, dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  dir.file(file, r.out);
}

TEST(CalibrateCli, NcclTestsTablesOfAKnownClusterFitBackToIt) {
  TempDir dir;
  dir.file("known.json", cluster_file(180, 2.5, 40, 7).dump(2));
  dir.file("guess.json", cluster_file(60, 10, 10, 1).dump(2));  // 3-7x off
  dir.file("k1.json", scenario("./known.json", 1));
  dir.file("k2.json", scenario("./known.json", 2));
  table(dir, "k1.json", "all_reduce", "all_reduce_perf.txt");
  table(dir, "k2.json", "all_reduce", "all_reduce_perf_2n.txt");
  table(dir, "k2.json", "all_gather", "all_gather_perf_2n.txt");
  const std::vector<std::string> args{"calibrate", "--base-cluster", "./guess.json", "--nccl-tests", "all_reduce_perf.txt", "--nccl-tests",
                                      "all_reduce_perf_2n.txt", "--nccl-tests", "all_gather=all_gather_perf_2n.txt", "-o", "out"};
  const auto r = run_dtsim(args, dir, dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  const Json fitted = Json::parse(slurp(dir.path("out/guess-calibrated.json")));
  const auto& c = fitted["cluster"];
  // The tables print 4-5 significant digits: the fit is as close as they let it be.
  EXPECT_NEAR(c["intra_node"]["bandwidth_GBps"].get<double>(), 180, 180 * 1e-3);
  EXPECT_NEAR(c["intra_node"]["latency_us"].get<double>(), 2.5, 2.5 * 1e-3);
  EXPECT_NEAR(c["inter_node"]["nic_bandwidth_GBps"].get<double>(), 40, 40 * 1e-3);
  EXPECT_NEAR(c["inter_node"]["latency_us"].get<double>(), 7, 7 * 1e-3);
  // The base, but for the fitted values.
  Json same = fitted["cluster"], base = cluster_file(60, 10, 10, 1)["cluster"];
  for (auto* j : {&same, &base}) {
    (*j)["intra_node"].erase("bandwidth_GBps"), (*j)["intra_node"].erase("latency_us");
    (*j)["inter_node"].erase("nic_bandwidth_GBps"), (*j)["inter_node"].erase("latency_us");
  }
  EXPECT_EQ(same, base);
  // A scenario names the calibrated profile by path and predicts the measured table again.
  dir.file("calibrated.json", scenario("./out/guess-calibrated.json", 2));
  table(dir, "calibrated.json", "all_reduce", "again.txt");
  const auto measured = times(slurp(dir.path("all_reduce_perf_2n.txt"))), again = times(slurp(dir.path("again.txt")));
  ASSERT_EQ(measured.size(), 11u);  // 1 KiB to 1 GiB by 4
  ASSERT_EQ(again.size(), measured.size());
  for (std::size_t i = 0; i < measured.size(); ++i) EXPECT_NEAR(again[i] / measured[i], 1.0, 2e-3) << "row " << i;
  const Json report = Json::parse(slurp(dir.path("out/calibration.json")));
  EXPECT_LT(report["collectives"]["rms_error"]["fitted"].get<double>(), 1e-3);
  EXPECT_GT(report["collectives"]["rms_error"]["base"].get<double>(), 1.0);
  // The same command gives the same bytes.
  const std::string profile = slurp(dir.path("out/guess-calibrated.json")), text = slurp(dir.path("out/calibration.txt")),
                    json = slurp(dir.path("out/calibration.json"));
  ASSERT_EQ(run_dtsim(args, dir, dir.path()).code, 0);
  EXPECT_EQ(slurp(dir.path("out/guess-calibrated.json")), profile);
  EXPECT_EQ(slurp(dir.path("out/calibration.txt")), text);
  EXPECT_EQ(slurp(dir.path("out/calibration.json")), json);
}

// GEMM times from the closed form of roofline.cpp's curve, max·F/(F + half) of the bf16 peak:
// t = (F + half) / (max · 989.4 TFLOP/s), with max 0.7 and half 8 GFLOP. Every shape is
// compute-bound on an H100 (its memory term is below 25 % of this).
std::string gemm_csv() {
  std::string csv = "m,n,k,dtype,time_us\n";
  for (double s : {1024.0, 2048.0, 4096.0, 8192.0, 16384.0}) {
    const double flops = 2 * s * s * s, t = (flops + 8e9) / (0.7 * 989.4e12);
    csv += fmt::format("{},{},{},bf16,{:.9g}\n", s, s, s, t * 1e6);
  }
  return csv;
}

TEST(CalibrateCli, GemmTimesOfAKnownCurveWriteThatCurveAndAScenarioRunsOnIt) {
  TempDir dir;
  dir.file("g.csv", gemm_csv());
  const auto r = run_dtsim({"calibrate", "--base-device", "h100-sxm-80gb", "--gemm", "g.csv", "-o", "out"}, dir, dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  Json fitted = Json::parse(slurp(dir.path("out/h100-sxm-80gb-calibrated.json")));
  EXPECT_NEAR(fitted["gemm_efficiency"]["max"].get<double>(), 0.7, 1e-5);
  EXPECT_NEAR(fitted["gemm_efficiency"]["half_flops"].get<double>() / 8e9, 1.0, 1e-5);
  EXPECT_EQ(fitted["name"], "h100-sxm-80gb-calibrated");
  EXPECT_NE(fitted["sources"]["gemm_efficiency"].get<std::string>().find("g.csv"), std::string::npos);
  Json base = Json::parse(slurp(kSource + "/hardware_profiles/h100-sxm-80gb.json"));
  for (auto* j : {&fitted, &base})
    for (const char* key : {"name", "description", "gemm_efficiency", "sources"}) j->erase(key);
  EXPECT_EQ(fitted, base) << "only the fitted curve (and its name and source) changes";
  dir.file("mine.json", scenario("dgx-h100", 1, "./out/h100-sxm-80gb-calibrated.json"));
  dir.file("shipped.json", scenario("dgx-h100", 1));
  const auto mine = run_dtsim({"run", "mine.json", "--format", "json"}, dir, dir.path());
  const auto shipped = run_dtsim({"run", "shipped.json", "--format", "json"}, dir, dir.path());
  ASSERT_EQ(mine.code, 0) << mine.err;
  ASSERT_EQ(shipped.code, 0) << shipped.err;
  EXPECT_GT(Json::parse(mine.out)["step_time_s"].get<double>(), Json::parse(shipped.out)["step_time_s"].get<double>())
      << "a GEMM curve of 0.7 instead of 0.803 makes the step slower";
}

TEST(CalibrateCli, ARealLayoutLogATraceAndStepTimesParseFitAndReport) {
  TempDir dir;
  dir.file("s.json", scenario("dgx-h100", 1));
  dir.file("steps.log", "step 1 time_s 0.30\nstep 2 time_s 0.21\nstep 3 time_s 0.20\n");
  const auto r = run_dtsim({"calibrate", "--base-cluster", "dgx-h100", "--nccl-tests", kData + "/all_reduce_perf_8xh100.txt", "--trace",
                            kData + "/pytorch_trace.json", "--steps", "steps.log", "--scenario", "s.json", "-o", "out"},
                           dir, dir.path());
  ASSERT_EQ(r.code, 0) << r.err;
  const Json rep = Json::parse(slurp(dir.path("out/calibration.json")));
  const auto& file = rep["collectives"]["files"][0];
  EXPECT_EQ(file["test"], "all_reduce_perf");
  EXPECT_EQ(file["rows"].size(), 7u);
  EXPECT_LE(file["rms_error"]["fitted"].get<double>(), file["rms_error"]["base"].get<double>());
  EXPECT_FALSE(rep["collectives"]["tiers"][0]["note"].get<std::string>().empty()) << "NVLS rows are priced by NCCL's model";
  EXPECT_EQ(rep["trace"]["dispatch_us"], 9.0);
  EXPECT_EQ(rep["trace"]["stack"]["preset"], "default");
  const auto run = run_dtsim({"run", "s.json", "--format", "json"}, dir, dir.path());
  ASSERT_EQ(run.code, 0) << run.err;
  const double predicted = Json::parse(run.out)["step_time_s"].get<double>();
  EXPECT_NEAR(rep["steps"]["predicted_s"].get<double>(), predicted, predicted * 1e-5);
  EXPECT_NEAR(rep["steps"]["error"].get<double>(), predicted / 0.21 - 1, 1e-5);
  EXPECT_TRUE(std::filesystem::exists(dir.path("out/dgx-h100-calibrated.json")));
  EXPECT_NE(r.out.find("Nothing is fitted to step times"), std::string::npos) << r.out;
  // The calibrated cluster is what a scenario then names, by its path, end to end.
  dir.file("calibrated.json", scenario("./out/dgx-h100-calibrated.json", 1));
  const auto on_it = run_dtsim({"run", "calibrated.json", "--format", "json"}, dir, dir.path());
  ASSERT_EQ(on_it.code, 0) << on_it.err;
  EXPECT_GT(Json::parse(on_it.out)["step_time_s"].get<double>(), 0.0);
}

TEST(CalibrateCli, BadInputWritesNothingAndSaysWhere) {
  TempDir dir;
  dir.file("g.csv", "m,n,k,dtype,time_us\n1024,1024,1024,bf16,10\n1024,1024,1024,bf61,10\n");
  auto r = run_dtsim({"calibrate", "--base-cluster", "dgx-h100", "--nccl-tests", kData + "/all_reduce_perf_8xh100.txt", "--base-device",
                      "h100-sxm-80gb", "--gemm", "g.csv", "-o", "out"},
                     dir, dir.path());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("g.csv:3: dtype \"bf61\""), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.path("out"))) << "all or nothing: the good cluster fit is not written either";
  r = run_dtsim({"calibrate", "--nccl-tests", "x.txt", "-o", "out"}, dir, dir.path());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--nccl-tests: needs --base-cluster"), std::string::npos) << r.err;
  r = run_dtsim({"calibrate", "--base-device", "h100-sxm-80", "--gemm", "g.csv", "-o", "out"}, dir, dir.path());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("did you mean \"h100-sxm-80gb\""), std::string::npos) << r.err;
  r = run_dtsim({"calibrate", "-o", "out"}, dir, dir.path());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("nothing to calibrate"), std::string::npos) << r.err;
}

}  // namespace
