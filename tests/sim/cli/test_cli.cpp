#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "helpers.hpp"

using namespace dtsim;

namespace {

struct Outcome {
  int code;
  std::string out, err;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Outcome dtsim_cli(const std::string& args, const test::TempDir& dir) {
  std::string out = dir.path("stdout.txt"), err = dir.path("stderr.txt");
  std::string cmd = std::string(DTSIM_BINARY) + " " + args + " > " + out + " 2> " + err;
  int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
}

std::string scenario(const std::string& name) { return test::source_dir() + "/scenarios/" + name; }


}  // namespace

TEST(Cli, RunKernelsAddsTheKernelTableToTheTextOnly) {
  test::TempDir dir;
  auto r = dtsim_cli("run " + scenario("gpt2-dp8-a100.json") + " -o " + dir.path("out") + " --kernels", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("kernel time by role (GPU 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GEMMs"), std::string::npos) << r.out;
  r = dtsim_cli("run " + scenario("gpt2-dp8-a100.json") + " -o " + dir.path("out") + " --kernels --format json", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NO_THROW((void)nlohmann::json::parse(r.out));  // stdout stays one JSON document
}

TEST(Cli, RunJsonPrintsEverySpecField) {
  test::TempDir dir;
  auto r = dtsim_cli("run " + scenario("gpt2-dp8-a100.json") + " -o " + dir.path("out") + " --format json", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  for (const char* p : {"/schema_version", "/scenario", "/step_time_s", "/throughput/samples_per_s",
                        "/throughput/tokens_per_s", "/flops/model_flops_per_step", "/flops/hardware_flops_per_step",
                        "/flops/model_tflops_per_gpu", "/flops/mfu", "/flops/hfu", "/breakdown_s/compute",
                        "/breakdown_s/exposed_communication", "/breakdown_s/pipeline_bubble", "/breakdown_s/optimizer",
                        "/breakdown_s/straggler_wait", "/memory/worst_rank", "/memory/params_bytes",
                        "/memory/gradients_bytes", "/memory/optimizer_bytes", "/memory/activations_bytes",
                        "/memory/other_bytes", "/memory/peak_bytes", "/memory/capacity_bytes", "/memory/fits",
                        "/warnings", "/provenance/dtsim_version", "/provenance/wall_time_s"})
    EXPECT_TRUE(j.contains(nlohmann::json::json_pointer(p))) << p;
  // The breakdown is attributed on the critical path, so it adds up to the step.
  double sum = 0;
  for (const auto& [k, v] : j["breakdown_s"].items()) sum += v.get<double>();
  EXPECT_NEAR(sum, j["step_time_s"].get<double>(), 1e-9);
  double mfu = j["flops"]["mfu"].get<double>();
  EXPECT_GT(mfu, 0.2);
  EXPECT_LT(mfu, 0.8);
  EXPECT_TRUE(std::filesystem::exists(dir.path("out/result.json")));
}

TEST(Cli, RepeatedRunsWriteByteIdenticalResults) {
  test::TempDir dir;
  ASSERT_EQ(dtsim_cli("run " + scenario("default.json") + " -o " + dir.path("a"), dir).code, 0);
  ASSERT_EQ(dtsim_cli("run " + scenario("default.json") + " -o " + dir.path("b"), dir).code, 0);
  std::string a = slurp(dir.path("a/result.json")), b = slurp(dir.path("b/result.json"));
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, b);
}

TEST(Cli, OverlappingBucketsWithBackwardShortensTheStep) {
  test::TempDir dir;
  std::string base = scenario("gpt2-dp64-a100.json");
  std::string off = dir.file("off.json", R"({"extends": ")" + base + R"(", "name": "no-overlap",
      "parallelism": {"overlap_grad_reduce": false}})");
  auto on_r = dtsim_cli("run " + base + " -o " + dir.path("on") + " --format json", dir);
  auto off_r = dtsim_cli("run " + off + " -o " + dir.path("off") + " --format json", dir);
  ASSERT_EQ(on_r.code, 0) << on_r.err;
  ASSERT_EQ(off_r.code, 0) << off_r.err;
  auto on = nlohmann::json::parse(on_r.out), no = nlohmann::json::parse(off_r.out);
  EXPECT_LT(on["step_time_s"].get<double>(), no["step_time_s"].get<double>());
  EXPECT_LT(on["breakdown_s"]["exposed_communication"].get<double>(),
            no["breakdown_s"]["exposed_communication"].get<double>());
}

TEST(Cli, SimGridAndAnalyticalBackendsAgreeWithoutContention) {
  test::TempDir dir;
  std::string base = dir.file("base.json", test::kValidScenario);
  std::string fast = dir.file("fast.json", R"({"extends": "base.json", "simulation": {"backend": "analytical"}})");
  auto a = nlohmann::json::parse(dtsim_cli("run " + base + " -o " + dir.path("a") + " --format json", dir).out);
  auto b = nlohmann::json::parse(dtsim_cli("run " + fast + " -o " + dir.path("b") + " --format json", dir).out);
  EXPECT_NEAR(a["step_time_s"].get<double>() / b["step_time_s"].get<double>(), 1.0, 1e-6);
}

TEST(Cli, MemoryCommandNeedsNoSimulation) {
  test::TempDir dir;
  auto r = dtsim_cli("memory " + scenario("default.json") + " --format json", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["memory"]["fits"].get<bool>());
  EXPECT_FALSE(j.contains("step_time_s"));
}

TEST(Cli, PlainDataParallel7p5BHolds120GBOfModelStates) {
  // ZeRO paper Table 1 / Figure 1: 7.5 B parameters, mixed-precision Adam, no sharding.
  test::TempDir dir;
  dir.file("base.json", test::kValidScenario);
  std::string f = dir.file("m.json", R"({"extends": "base.json", "model": {"preset": null, "kind": "transformer",
      "num_layers": 36, "hidden_size": 4096, "num_heads": 32, "seq_len": 2048, "vocab_size": 51200}})");
  auto r = dtsim_cli("memory " + f + " --format json", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  auto m = nlohmann::json::parse(r.out)["memory"];
  double params = nlohmann::json::parse(r.out)["model"]["params"].get<double>();
  double states = m["params_bytes"].get<double>() + m["gradients_bytes"].get<double>() + m["optimizer_bytes"].get<double>();
  EXPECT_NEAR(params / 7.5e9, 1.0, 0.02);  // Megatron's 7.5 B configuration
  EXPECT_NEAR(states, 16.0 * params, 16.0);
  EXPECT_NEAR(states / 120e9, 1.0, 0.02);
  EXPECT_FALSE(m["fits"].get<bool>());  // 120 GB of states alone exceed an 80 GB A100
}

struct BadInput {
  const char* name;
  const char* body;  // written as child.json beside a valid base.json
  const char* expected;  // in the message
};

void PrintTo(const BadInput& b, std::ostream* os) { *os << b.name; }

class CliBadInput : public ::testing::TestWithParam<BadInput> {};

TEST_P(CliBadInput, ExitsTwoNamingThePointerAndWritesNothing) {
  test::TempDir dir;
  dir.file("base.json", test::kValidScenario);
  std::string f = dir.file("child.json", GetParam().body);
  auto r = dtsim_cli("run " + f + " -o " + dir.path("out"), dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("error: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(GetParam().expected), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir.path("out")));
}

INSTANTIATE_TEST_SUITE_P(
    Inputs, CliBadInput,
    ::testing::Values(
        BadInput{"MalformedJson", R"({"extends": "base.json", "name": })", "child.json: malformed JSON at line 1"},
        BadInput{"MissingField", R"({"extends": "base.json", "training": {"global_batch_size": null}})",
                 "child.json:/training/global_batch_size: required key is missing"},
        BadInput{"UnknownKey", R"({"extends": "base.json", "cluster": {"gpu_per_node": 8}})",
                 "child.json:/cluster/gpu_per_node: unknown key"},
        BadInput{"WrongType", R"({"extends": "base.json", "parallelism": {"data": "eight"}})",
                 "child.json:/parallelism/data: expected an integer"},
        BadInput{"ZeroGpus", R"({"extends": "base.json", "cluster": {"nodes": 0}})", "child.json:/cluster/nodes: 0 is out of range"},
        BadInput{"NegativeBandwidth", R"({"extends": "base.json", "cluster": {"inter_node": {"nic_bandwidth_GBps": -25}}})",
                 "child.json:/cluster/inter_node/nic_bandwidth_GBps: -25 is out of range"},
        BadInput{"ParallelismDoesNotCoverGpus", R"({"extends": "base.json", "parallelism": {"data": 4}})",
                 "child.json:/parallelism/data: data (4) x tensor (1) x pipeline (1) = 4, but the cluster has 8 GPUs"},
        BadInput{"AbsurdLayerCount", R"({"extends": "base.json", "model": {"num_layers": 1e30}})",
                 "child.json:/model/num_layers"},
        BadInput{"TensorDoesNotDivideHeads", R"({"extends": "base.json", "parallelism": {"data": 1, "tensor": 8}, "model": {"num_heads": 12}})",
                 "child.json:/parallelism/tensor: 8 does not divide model.num_heads (12)"},
        BadInput{"UnknownDevice", R"({"extends": "base.json", "hardware": {"device": "tpu-v9"}})",
                 "child.json:/hardware/device: unknown device"},
        BadInput{"MissingBase", R"({"extends": "nowhere.json"})", "child.json:/extends: base scenario"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(Cli, MissingScenarioFileIsAnInputError) {
  test::TempDir dir;
  auto r = dtsim_cli("run " + dir.path("absent.json"), dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no such file"), std::string::npos);
}

TEST(Cli, UsageErrorsExitTwo) {
  test::TempDir dir;
  EXPECT_EQ(dtsim_cli("frobnicate", dir).code, 2);
  EXPECT_EQ(dtsim_cli("run", dir).code, 2);
  EXPECT_EQ(dtsim_cli("run x.json --format yaml", dir).code, 2);
}

TEST(Cli, CompareFlagsASlowerCandidate) {
  test::TempDir dir;
  std::string a = dir.file("a.json", R"({"step_time_s": 1.0, "memory": {"peak_bytes": 10, "fits": true}})");
  std::string b = dir.file("b.json", R"({"step_time_s": 1.1, "memory": {"peak_bytes": 10, "fits": true}})");
  EXPECT_EQ(dtsim_cli("compare " + a + " " + b, dir).code, 3);
  EXPECT_EQ(dtsim_cli("compare " + a + " " + b + " --rel-tol 0.2", dir).code, 0);
  EXPECT_EQ(dtsim_cli("compare " + a + " " + a, dir).code, 0);
}

TEST(Cli, ListShowsPresets) {
  test::TempDir dir;
  auto r = dtsim_cli("list models", dir);
  EXPECT_EQ(r.code, 0);
  for (const char* m : {"gpt2", "gpt3-175b", "llama-3-8b", "llama-3-70b"}) EXPECT_NE(r.out.find(m), std::string::npos) << m;
  EXPECT_NE(dtsim_cli("list devices", dir).out.find("h100-sxm-80gb"), std::string::npos);
}

TEST(Cli, ValidateMeetsTheMegatronTable1Targets) {
  // Every row of Megatron SC21 Table 1 within 10%, 5% on average (issue #3's targets; the README
  // gives the current errors).
  test::TempDir dir;
  auto r = dtsim_cli("validate --json " + dir.path("v.json"), dir);
  ASSERT_TRUE(r.code == 0 || r.code == 3) << r.err;
  auto j = nlohmann::json::parse(slurp(dir.path("v.json")));
  ASSERT_EQ(j["rows"].size(), 10u);
  double sum = 0;
  for (const auto& row : j["rows"]) {
    const double e = std::fabs(row["error_percent"].get<double>());
    EXPECT_LT(e, 10.0) << row["scenario"];
    sum += e;
  }
  EXPECT_LT(sum / 10.0, 5.0);
  EXPECT_NE(r.out.find("mean |error|"), std::string::npos);
  EXPECT_EQ(dtsim_cli("validate --max-error 0.001", dir).code, 3);
}

TEST(Cli, CollectiveTableForEveryOperation) {
  test::TempDir dir;
  for (const char* op : {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "all_to_all"}) {
    auto r = dtsim_cli(std::string("collective --op ") + op + " --algorithm auto --gpus 16 -b 1K -e 1M -f 32 --format json", dir);
    ASSERT_EQ(r.code, 0) << op << r.err;
    auto j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["rows"].size(), 3u) << op;
    double prev = 0;
    for (const auto& row : j["rows"]) {
      EXPECT_GT(row["time_us"].get<double>(), prev) << op;  // bigger buffers take longer
      prev = row["time_us"].get<double>();
      EXPECT_GT(row["busbw_GBps"].get<double>(), 0.0);
    }
  }
}

TEST(Cli, CollectiveRejectsAnUnsupportedPair) {
  test::TempDir dir;
  auto r = dtsim_cli("collective --op broadcast --algorithm master-worker", dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--algorithm"), std::string::npos);
  EXPECT_EQ(dtsim_cli("collective -b 8X", dir).code, 2);
}

// Issue 25: without --gpus, `collective --scenario` runs on the scenario's whole cluster, so a TPU
// v3-32 (4 x 4 torus, 82 GB/s links, 1 us) all-reduces ring by ring along each dimension:
// 2 x (3/4 S / 164 GB/s + 3/4 S/4 / 164 GB/s + 6 x 1 us) (test Torus.AllReduceIsRings...), not
// over 8 of its 16 chips.
TEST(Cli, CollectiveOnAScenarioTakesItsWholeCluster) {
  test::TempDir dir;
  auto r = dtsim_cli("collective --scenario " + scenario("cnn/tpu-v3-32-resnet50.json") +
                         " -b 100M -e 100M --analytical --format json",
                     dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["gpus"].get<int>(), 16);
  const double s = 100.0 * 1048576, expected = 2 * (0.75 * s / 164e9 + 0.75 * s / 4 / 164e9 + 6e-6);
  EXPECT_NEAR(j["rows"][0]["time_us"].get<double>() / (expected * 1e6), 1.0, 1e-6);
  // --gpus still picks fewer.
  r = dtsim_cli("collective --scenario " + scenario("cnn/tpu-v3-32-resnet50.json") + " --gpus 8 -b 1M -e 1M --analytical --format json", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["gpus"].get<int>(), 8);
}

TEST(Cli, RingOvertakesParameterServersAsWorkersGrow) {
  test::TempDir dir;
  auto step = [&](const std::string& name) {
    auto r = dtsim_cli("run " + scenario("architectures/" + name + ".json") + " --format json -o " + dir.path(name), dir);
    EXPECT_EQ(r.code, 0) << r.err;
    return nlohmann::json::parse(r.out)["step_time_s"].get<double>();
  };
  // 8 servers: as fast as a ring for 8 workers, far slower for 64, since each server's link
  // carries p/8 of the gradients.
  EXPECT_NEAR(step("ps-8") / step("ring-8"), 1.0, 0.05);
  EXPECT_GT(step("ps-64") / step("ring-64"), 1.5);
}

TEST(Cli, ProfileWritesATableARunCanUse) {
  test::TempDir dir;
  auto r = dtsim_cli("profile --device cpu --model tiny-gpt --micro-batch 1 --repeats 1 -o " + dir.path("t.json"), dir);
  ASSERT_EQ(r.code, 0) << r.err;
  auto t = nlohmann::json::parse(slurp(dir.path("t.json")));
  for (const char* k : {"cpu_model", "threads", "compiler", "eigen", "date"}) EXPECT_TRUE(t["provenance"].contains(k)) << k;
  EXPECT_GT(t["gemm"].size(), 5u);
  // The shipped CPU scenario prices its compute from the shipped measured table, all but the
  // final norm's 6 KB gradient add: smaller than any size that table measured, it falls back to
  // the roofline rather than extrapolate.
  auto run = dtsim_cli("run " + scenario("cpu/tiny-gpt-cpu.json") + " --format json -o " + dir.path("o"), dir);
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_GT(nlohmann::json::parse(run.out)["compute_source"]["measured_share"].get<double>(), 0.9999);
  // No GPU here (or no CUDA in this build): a clear error, exit 2, and no table written.
  auto cuda = dtsim_cli("profile --device cuda -o " + dir.path("gpu.json"), dir);
  EXPECT_EQ(cuda.code, 2);
  EXPECT_NE(cuda.err.find("--device"), std::string::npos) << cuda.err;
  EXPECT_FALSE(std::filesystem::exists(dir.path("gpu.json")));
  EXPECT_EQ(dtsim_cli("profile --device cuda --dtype int8 -o " + dir.path("gpu.json"), dir).code, 2);
  EXPECT_FALSE(std::filesystem::exists(dir.path("gpu.json")));
  EXPECT_EQ(dtsim_cli("profile --device cpu --dtype bf16 -o " + dir.path("c.json"), dir).code, 2);
  EXPECT_FALSE(std::filesystem::exists(dir.path("c.json")));
}

TEST(Cli, SlowLoaderShowsAsInputStall) {
  test::TempDir dir;
  auto r = dtsim_cli("run " + scenario("input-stall-gpt2.json") + " --format json -o " + dir.path("o"), dir);
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  // Every micro-batch waits for a loader that needs 240 ms per micro-batch.
  EXPECT_GT(j["breakdown_s"]["input_stall"].get<double>(), 0.3);
  double sum = 0;
  for (const auto& [k, v] : j["breakdown_s"].items()) sum += v.get<double>();
  EXPECT_NEAR(sum, j["step_time_s"].get<double>(), 1e-9);
}

TEST(Cli, SweepRanksStrategiesThatFitFirst) {
  test::TempDir dir;
  auto r = dtsim_cli("sweep " + scenario("gpt2-dp8-a100.json") + " --format json --top 1000", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_GT(j["rows"].size(), 10u);
  bool seen_unfit = false;
  double prev = 1e300;
  for (const auto& row : j["rows"]) {
    EXPECT_EQ(row["tensor"].get<int>() * row["pipeline"].get<int>() * row["data"].get<int>(), 8);
    if (!row["fits"].get<bool>()) seen_unfit = true;
    else {
      EXPECT_FALSE(seen_unfit);  // every fitting strategy ranks above every other
      EXPECT_LE(row["samples_per_s"].get<double>(), prev);
      prev = row["samples_per_s"].get<double>();
    }
  }
  EXPECT_EQ(dtsim_cli("sweep " + scenario("gpt2-dp8-a100.json") + " --gpus 12", dir).code, 2);
}

TEST(Cli, ThrottledGpuAndFlappingLinkSlowTheStepsTheyTouch) {
  test::TempDir dir;
  auto steps = [&](const std::string& name) {
    auto r = dtsim_cli("run " + scenario("stragglers/" + name + ".json") + " --format json -o " + dir.path(name), dir);
    EXPECT_EQ(r.code, 0) << r.err;
    return nlohmann::json::parse(r.out)["stragglers"];
  };
  auto healthy = nlohmann::json::parse(
      dtsim_cli("run " + scenario("gpt2-dp64-a100.json") + " --format json -o " + dir.path("h"), dir).out)["step_time_s"].get<double>();
  auto throttled = steps("dp64-throttled-gpu");
  // Half speed for 100 ms costs about 50 ms over the run; steps outside the window are untouched.
  EXPECT_NEAR(throttled["step_time_p50_s"].get<double>(), healthy, 0.01 * healthy);
  EXPECT_NEAR((throttled["step_time_mean_s"].get<double>() - healthy) * 6, 0.05, 0.01);
  EXPECT_GT(steps("dp64-flapping-link")["step_time_mean_s"].get<double>(), 1.05 * healthy);
  // Latency alone: 2 ms instead of 2.5 us on every message through GPU 0's NIC in the window.
  EXPECT_GT(steps("dp64-flapping-latency")["step_time_mean_s"].get<double>(), 1.03 * healthy);
  // A GPU throttled from the very start to past the end: every step takes its compute twice.
  const std::string f = dir.file("whole.json", R"({"extends": ")" + scenario("stragglers/dp64-throttled-gpu.json") +
                                                   R"(", "stragglers": {"throttles": [{"gpu": 13, "start_s": 0, "duration_s": 100, "slowdown": 2}]}})");
  auto whole = dtsim_cli("run " + f + " --format json -o " + dir.path("whole"), dir);
  ASSERT_EQ(whole.code, 0) << whole.err;
  EXPECT_GT(nlohmann::json::parse(whole.out)["stragglers"]["step_time_p50_s"].get<double>(), 1.5 * healthy);
}

TEST(Cli, HtmlReportDrawsTimelineBreakdownAndMemory) {
  test::TempDir dir;
  auto r = dtsim_cli("run " + scenario("pipeline/gpt3-175b-1f1b.json") + " --html -o " + dir.path("o"), dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string html = slurp(dir.path("o/report.html"));
  EXPECT_NE(html.find("gpt3-175b-pp8-1f1b"), std::string::npos);
  EXPECT_NE(html.find("pipeline bubble"), std::string::npos);
  EXPECT_NE(html.find("stage 7"), std::string::npos);  // one memory bar per pipeline stage
  std::size_t svgs = 0;
  for (std::size_t at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1)) ++svgs;
  EXPECT_EQ(svgs, 3u + 8u);  // breakdown, timeline, memory over the step, 8 stages
}
