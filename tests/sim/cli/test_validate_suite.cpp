// `dtsim validate --suite DIR`: every scenario with a published figure under DIR, summarised by
// group with its direction, checked against each row's tolerance, and ranked within sets.
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "run_dtsim.hpp"

namespace {

using dtsim::test::run_dtsim;
using dtsim::test::slurp;

std::string exact(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// A data-parallel GPT-2 on `gpus` A100s (analytical backend: a fraction of a second), claimed to
// have been measured at `published_s`.
std::string row(const std::string& name, int gpus, double published_s, const std::string& extra) {
  return "{\"extends\": \"" + dtsim::test::source_dir() + "/scenarios/gpt2-dp8-a100.json\", \"name\": \"" + name +
         "\", \"cluster\": {\"nodes\": " + std::to_string(gpus / 8) + "}, \"parallelism\": {\"data\": " +
         std::to_string(gpus) + "}, \"training\": {\"global_batch_size\": " + std::to_string(gpus * 16) +
         "}, \"simulation\": {\"backend\": \"analytical\"}, \"reference\": {\"source\": \"a test\", \"step_time_s\": " +
         exact(published_s) + extra + "}}";
}

double predicted(const dtsim::test::TempDir& dir, const std::string& file) {
  const std::string out = dir.path("one");
  const auto r = run_dtsim({"run", "--format", "json", "-o", out, file}, dir);
  EXPECT_EQ(r.code, 0) << r.err;
  return nlohmann::json::parse(r.out)["step_time_s"].get<double>();
}

}  // namespace

TEST(ValidateSuite, SummarisesByGroupRanksAndChecksTolerance) {
  dtsim::test::TempDir dir;
  // Two groups: one by sub-folder name, one named in the reference. Step times are set from
  // dtsim's own prediction so that the errors are known: +0 %, -20 % (too fast), +50 % (too slow).
  const std::string a = dir.file("suite/by-folder/a.json", row("a", 8, 1.0, ""));
  const double pa = predicted(dir, a);
  dir.file("suite/by-folder/a.json", row("a", 8, pa, ", \"ranking\": \"r\""));
  const std::string b = dir.file("suite/by-folder/b.json", row("b", 16, 1.0, ""));
  const double pb = predicted(dir, b);
  dir.file("suite/by-folder/b.json", row("b", 16, pb / 0.8, ", \"ranking\": \"r\", \"tolerance_percent\": 25"));
  const std::string c = dir.file("suite/c.json", row("c", 32, 1.0, ""));
  const double pc = predicted(dir, c);
  dir.file("suite/c.json", row("c", 32, pc / 1.5, ", \"group\": \"named\", \"peak_memory_GiB\": 10"));

  auto r = run_dtsim({"validate", "--suite", dir.path("suite"), "--json", dir.path("v.json")}, dir);
  ASSERT_EQ(r.code, 0) << r.err;  // without --strict a row outside tolerance is reported, not failed
  const auto j = nlohmann::json::parse(slurp(dir.path("v.json")));
  ASSERT_EQ(j["rows"].size(), 3u);
  ASSERT_EQ(j["groups"].size(), 2u);
  const auto& folder = j["groups"][0];
  EXPECT_EQ(folder["group"], "by-folder");
  EXPECT_EQ(folder["rows"], 2);
  EXPECT_NEAR(folder["mean_abs_error_percent"].get<double>(), 10.0, 1e-6);  // (0 + 20) / 2
  EXPECT_EQ(folder["too_slow"], 0);
  EXPECT_EQ(folder["outside_tolerance"], 0);  // b's 20 % is within its own 25 %
  const auto& named = j["groups"][1];
  EXPECT_EQ(named["group"], "named");
  EXPECT_NEAR(named["mean_abs_error_percent"].get<double>(), 50.0, 1e-6);
  EXPECT_EQ(named["too_slow"], 1);
  EXPECT_EQ(named["outside_tolerance"], 1);
  EXPECT_EQ(named["memory_rows"], 1);
  // a ran faster than b in the "measurements", and dtsim agrees.
  ASSERT_EQ(j["rankings"].size(), 1u);
  EXPECT_DOUBLE_EQ(j["rankings"][0]["kendall_tau_b"].get<double>(), 1.0);
  EXPECT_TRUE(j["rankings"][0]["top1_hit"].get<bool>());
  EXPECT_NE(r.out.find("1 outside tolerance"), std::string::npos) << r.out;
  EXPECT_EQ(run_dtsim({"validate", "--strict", "--suite", dir.path("suite")}, dir).code, 3);
}

TEST(ValidateSuite, BadReferenceKeysAreClearErrors) {
  dtsim::test::TempDir dir;
  dir.file("suite/x.json", row("x", 8, 1.0, ", \"memory_reading\": \"reserved\""));
  auto r = run_dtsim({"validate", "--suite", dir.path("suite")}, dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("/reference/memory_reading"), std::string::npos) << r.err;
  dir.file("suite/x.json", row("x", 8, 1.0, ", \"tolerance_precent\": 5"));
  r = run_dtsim({"validate", "--suite", dir.path("suite")}, dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("tolerance_percent"), std::string::npos) << r.err;  // did you mean
  EXPECT_EQ(run_dtsim({"validate", "--suite", dir.path("nowhere")}, dir).code, 2);
}
