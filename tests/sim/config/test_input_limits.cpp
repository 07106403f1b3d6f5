// Inputs that could hurt the machine or be silently misread are input errors (exit 2, file and
// JSON pointer), refused before anything large is built: deep nesting, numbers beyond a double,
// duplicate keys, physically absurd quantities, and work too large to simulate here.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "run_dtsim.hpp"
#include "scenario_helpers.hpp"
#include "sim/core/errors.hpp"
#include "sim/core/json_reader.hpp"
#include "sim/results/budget.hpp"

using namespace dtsim;

namespace {

using test::Outcome;
using test::slurp;

// Runs dtsim with these arguments (no shell), stdout and stderr to files in `dir`.
Outcome dtsim_cli(const std::vector<std::string>& args, const test::TempDir& dir) { return test::run_dtsim(args, dir); }

std::string scenario(const std::string& name) { return test::source_dir() + "/scenarios/" + name; }

// A scenario over scenarios/default.json (GPT-2 XL, 16 A100s) with these keys merged in.
std::string over_default(const test::TempDir& dir, const std::string& name, const std::string& keys) {
  return dir.file(name, R"({"extends": ")" + scenario("default.json") + R"(", )" + keys + "}");
}

// Exit 2 and "error: FILE:POINTER: ..." (the file as the command was given it) naming `reason`.
void expect_refused(const Outcome& r, const std::string& file, const std::string& pointer, const std::string& reason) {
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("error: " + file + ":" + pointer + ": "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(reason), std::string::npos) << r.err;
}

}  // namespace

// --- item 2: nesting -------------------------------------------------------------------------

TEST(InputLimits, ArraysNested100000DeepAreRefusedAtTheirPointer) {
  test::TempDir dir;
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::string f = dir.file("deep.json", R"({"schema_version": 1, "name": "deep", "model": )" + deep + "}");
  const auto r = dtsim_cli({"run", f, "-o", dir.path("out")}, dir);
  std::string pointer = "/model";
  for (std::size_t i = 0; i < kMaxJsonDepth - 1; ++i) pointer += "/0";
  expect_refused(r, f, pointer, "nested deeper than 64 levels");
  EXPECT_FALSE(std::filesystem::exists(dir.path("out")));
}

TEST(InputLimits, ObjectsNested40000DeepAreRefusedAtTheirPointer) {
  test::TempDir dir;
  std::string deep;
  for (int i = 0; i < 40000; ++i) deep += R"({"a": )";
  deep += "1" + std::string(40000, '}');
  const std::string f = dir.file("deep.json", R"({"schema_version": 1, "name": "deep", "cluster": )" + deep + "}");
  const auto r = dtsim_cli({"memory", f}, dir);
  std::string pointer = "/cluster";
  for (std::size_t i = 0; i < kMaxJsonDepth - 1; ++i) pointer += "/a";
  expect_refused(r, f, pointer, "nested deeper than 64 levels");
}

TEST(InputLimits, NestingWithinTheLimitStillParses) {
  std::string text;
  for (std::size_t i = 0; i < kMaxJsonDepth; ++i) text += "[";
  for (std::size_t i = 0; i < kMaxJsonDepth; ++i) text += "]";
  EXPECT_NO_THROW(parse_json_text(text, "ok.json"));
  EXPECT_THROW(parse_json_text("[" + text + "]", "deep.json"), InputError);
}

// --- item 3: numbers, duplicate keys, physical ranges ------------------------------------------

TEST(InputLimits, NumberBeyondADoubleNamesFileAndPointer) {
  test::TempDir dir;
  const auto f = over_default(dir, "big.json", R"("cluster": {"nodes": 1e400})");
  expect_refused(dtsim_cli({"run", f, "-o", dir.path("out")}, dir), f, "/cluster/nodes", "1e400");
  const auto g = over_default(dir, "small.json", R"("stragglers": {"slow_gpus": [{"gpu": 1, "slowdown": -1e999}]})");
  expect_refused(dtsim_cli({"memory", g}, dir), g, "/stragglers/slow_gpus/0/slowdown", "-1e999");
}

TEST(InputLimits, DuplicateKeysAreAnInputErrorAtTheirPointer) {
  test::TempDir dir;
  const auto f = over_default(dir, "dup.json", R"("parallelism": {"data": 16, "micro_batch_size": 4, "data": 8})");
  expect_refused(dtsim_cli({"memory", f}, dir), f, "/parallelism/data", "appears twice");
  try {
    parse_json_text(R"({"a": [1, {"b": 1, "c": {"b": 2}, "b": 3}]})", "x.json");
    FAIL() << "accepted a duplicate key";
  } catch (const InputError& e) {
    EXPECT_EQ(e.pointer(), "/a/1/b");
  }
}

TEST(InputLimits, AbsurdBandwidthIsRefusedWithTheRange) {
  test::TempDir dir;
  const auto f = over_default(dir, "bw.json", R"("cluster": {"inter_node": {"nic_bandwidth_GBps": 1e-300}})");
  expect_refused(dtsim_cli({"run", f, "-o", dir.path("out")}, dir), f, "/cluster/inter_node/nic_bandwidth_GBps",
                 "must be between 0.001 and 1e+06");
  EXPECT_FALSE(std::filesystem::exists(dir.path("out")));
}

// Every quantity goes through the units layer's physical span, whatever unit it is written in.
TEST(InputLimits, EveryUnitOfAQuantityHasAPhysicalSpan) {
  auto origins = std::make_shared<Origins>();
  origins->default_file = "q.json";
  auto read = [&](const char* json, units::Dimension d) {
    const Json j = Json::parse(json);
    Reader r(j, "", origins);
    return r.quantity("x", d, Range{0.0, 1e300});
  };
  EXPECT_DOUBLE_EQ(read(R"({"x_Gbps": 400})", units::Dimension::Bandwidth), 50e9);
  EXPECT_DOUBLE_EQ(read(R"({"x_us": 0})", units::Dimension::Time), 0.0);  // an ideal zero latency
  for (const char* bad : {R"({"x_MBps": 1e-9})", R"({"x_Gbps": 1e20})"})
    EXPECT_THROW(read(bad, units::Dimension::Bandwidth), InputError) << bad;
  for (const char* bad : {R"({"x_ns": 1e-6})", R"({"x_days": 1e12})"}) EXPECT_THROW(read(bad, units::Dimension::Time), InputError) << bad;
  for (const char* bad : {R"({"x_bytes": 1e-3})", R"({"x_GiB": 1e12})"}) EXPECT_THROW(read(bad, units::Dimension::Bytes), InputError) << bad;
  const Json peaks = Json::parse(R"({"bf16": 1e-300})");
  Reader r(peaks, "/peak_tflops", origins);
  try {
    r.number_in("bf16", units::Dimension::FlopRate, 1e12, Range{0.0, 1e6, true});
    FAIL() << "accepted a peak of 1e-300 TFLOP/s";
  } catch (const InputError& e) {
    EXPECT_EQ(e.pointer(), "/peak_tflops/bf16");
    EXPECT_NE(e.reason().find("between 1e-06 and 1e+06"), std::string::npos) << e.reason();
  }
}

// Lists that become SimGrid profiles, each checked against the others, are bounded; a link
// cannot flap faster than SimGrid can replay.
TEST(InputLimits, StragglerListsAndFlapPeriodsAreBounded) {
  std::string throttles;
  for (int i = 0; i < 1025; ++i)
    throttles += (i ? ", " : "") + std::string(R"({"gpu": )") + std::to_string(i % 8) + R"(, "start_s": )" + std::to_string(i) +
                 R"(, "duration_s": 0.5, "slowdown": 2})";
  EXPECT_EQ(test::input_error_over_base(R"({"extends": "base.json", "stragglers": {"throttles": [)" + throttles + "]}}"),
            "/stragglers/throttles: 1025 entries are more than the 1024 modelled");
  EXPECT_EQ(test::input_error_over_base(R"({"extends": "base.json", "stragglers": {"flapping_links": [{"gpu": 0,
      "period_us": 1, "degraded_us": 0.5, "bandwidth_fraction": 0.5}]}})"),
            "/stragglers/flapping_links/0/period_us: 1 is out of range: must be >= 1000 and <= 1e+15");
}

// --- item 5: work too large for the machine, refused before anything is built ----------------

TEST(InputLimits, CollectiveCountsItsSizesBeforeBuildingThem) {
  test::TempDir dir;
  const auto r = dtsim_cli({"collective", "-f", "1.0000000001"}, dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("error: -f: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("more than 200"), std::string::npos) << r.err;
}

TEST(InputLimits, CollectiveOnAMillionGpusNamesTheLimit) {
  test::TempDir dir;
  auto r = dtsim_cli({"collective", "--gpus", "1048576"}, dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("error: --gpus: 1,048,576 GPUs on the simgrid backend exceed its limit of 65,536 GPUs"),
            std::string::npos)
      << r.err;
  r = dtsim_cli({"collective", "--gpus", "1048576", "--analytical"}, dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("over the limits of 60 s"), std::string::npos) << r.err;
  r = dtsim_cli({"collective", "--gpus", "131072", "-b", "1G", "-e", "1G"}, dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--analytical handles it"), std::string::npos) << r.err;
}

TEST(InputLimits, HundredThousandGpusOnSimGridPointToTheAnalyticalBackend) {
  test::TempDir dir;
  const auto f = over_default(dir, "100k.json", R"("cluster": {"nodes": 12500}, "parallelism": {"data": 100000},
      "training": {"global_batch_size": 400000})");
  const auto r = dtsim_cli({"run", f, "-o", dir.path("out")}, dir);
  expect_refused(r, f, "/cluster/nodes", "100,000 GPUs on the simgrid backend exceed its limit of 65,536 GPUs");
  EXPECT_NE(r.err.find("the analytical backend handles it"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.path("out")));
}

TEST(InputLimits, AMillionGpusAreRefusedOnSimGrid) {
  test::TempDir dir;
  const auto f = over_default(dir, "1m.json", R"("cluster": {"nodes": 131072}, "parallelism": {"data": 1048576},
      "training": {"global_batch_size": 4194304})");
  expect_refused(dtsim_cli({"run", f, "-o", dir.path("out")}, dir), f, "/cluster/nodes",
                 "1,048,576 GPUs on the simgrid backend exceed its limit");
}

TEST(InputLimits, TwentyThousandStepsNameTheTaskLimit) {
  test::TempDir dir;
  const auto f = over_default(dir, "steps.json", R"("simulation": {"steps": 20000})");
  expect_refused(dtsim_cli({"run", f, "-o", dir.path("out")}, dir), f, "/simulation/steps",
                 "over the limit of 4.0 million tasks");
}

TEST(InputLimits, ThreeMillionMicroBatchesNameTheTaskLimit) {
  test::TempDir dir;
  // 16 replicas of micro-batch 4: 3,000,000 micro-batches each.
  const auto f = over_default(dir, "mb.json", R"("training": {"global_batch_size": 192000000})");
  expect_refused(dtsim_cli({"run", f, "-o", dir.path("out")}, dir), f, "/training/global_batch_size",
                 "over the limit of 4.0 million tasks");
  expect_refused(dtsim_cli({"memory", f}, dir), f, "/training/global_batch_size", "planning this means about");
}

TEST(InputLimits, SweepOnAMillionGpusNamesTheLimit) {
  test::TempDir dir;
  const auto f = dir.file("sw.json", R"({"extends": ")" + scenario("gpt2-dp1024-a100.json") +
                                         R"(", "training": {"global_batch_size": 4194304}})");
  const auto r = dtsim_cli({"sweep", f, "--gpus", "1048576"}, dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("error: --gpus: sweeping"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("over the limits of 120 s"), std::string::npos) << r.err;
}

// The README's multi-cluster sweep (5,070 GPT-3 strategies on 256 to 1,024 A100s and H100s):
// priced in closed form with the best 5 replayed it runs (a few seconds); replaying every one
// (--exact) would take minutes and is refused. The budget counts what will run.
TEST(InputLimits, SweepBudgetCountsTheClosedFormAndTheConfirmedReplays) {
  test::TempDir dir;
  const std::vector<std::string> readme{"sweep", scenario("hybrid/gpt3-175b-1024-a100.json"), "--gpus", "256,512,1024",
                                        "--devices", "a100-sxm-80gb,h100-sxm-80gb", "--format", "csv"};
  const auto r = dtsim_cli(readme, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 5071) << r.out.substr(0, 400);  // the header and every strategy
  auto exact = readme;
  exact.push_back("--exact");
  const auto e = dtsim_cli(exact, dir);
  EXPECT_EQ(e.code, 2);
  EXPECT_NE(e.err.find("error: --gpus: sweeping 5070 strategies"), std::string::npos) << e.err;
}

TEST(InputLimits, ProfileRefusesKernelsTooLargeToAllocate) {
  test::TempDir dir;
  const auto r = dtsim_cli({"profile", "--model", "gpt3-175b", "--micro-batch", "1048576", "-o", dir.path("t.json")}, dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("error: --micro-batch: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("over the limit of 4 GB"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.path("t.json")));
}

// What the README and docs/ run stays allowed: its bench cases, collective examples and sweep.
TEST(InputLimits, ReadmeCasesStayWithinTheLimits) {
  using taskgraph::Algorithm;
  using taskgraph::CollectiveOp;
  network::ClusterSpec c = test::flat_cluster(16384);
  c.gpus_per_node = 8;
  c.nodes = 2048;
  c.nics_per_node = 8;
  for (auto a : {Algorithm::Ring, Algorithm::Tree, Algorithm::HalvingDoubling})
    EXPECT_NO_THROW(results::check_collective_budget(c, CollectiveOp::AllReduce, a, 16384, 1, false));
  c.nodes = 64;
  EXPECT_NO_THROW(results::check_collective_budget(c, CollectiveOp::AllReduce, Algorithm::Tree, 512, 31, false));
  test::TempDir dir;
  const auto r = dtsim_cli({"sweep", scenario("gpt2-dp8-a100.json"), "--gpus", "16", "--top", "1"}, dir);
  EXPECT_EQ(r.code, 0) << r.err;
}
