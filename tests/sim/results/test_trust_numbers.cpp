// Issue 25, "numbers shown that are not the ones simulated": what the summary, result.json and
// compare say about the configuration that ran; the loaders' share of every step; the bubble's
// share of the step; settings that would silently do nothing.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "helpers.hpp"
#include "run_dtsim.hpp"

using namespace dtsim;
using test::run_dtsim;
using test::slurp;

namespace {

std::string shipped(const std::string& name) { return test::source_dir() + "/scenarios/" + name; }

// GPT-2 on one node of 8 GPUs, analytical backend: a run of a fraction of a second.
const std::string kBase = R"({
  "schema_version": 1, "name": "trust",
  "model": {"preset": "gpt2"},
  "hardware": {"device": "h100-sxm-80gb"},
  "cluster": {"nodes": 1, "gpus_per_node": 8,
              "intra_node": {"bandwidth_GBps": 450, "latency_us": 2},
              "inter_node": {"nics_per_node": 8, "nic_bandwidth_GBps": 50, "latency_us": 5}},
  "parallelism": {"data": 8, "micro_batch_size": 4},
  "training": {"global_batch_size": 64},
  "simulation": {"backend": "analytical"}
})";

// `overrides` over kBase, written into `dir`; returns its path.
std::string scenario_over_base(const test::TempDir& dir, const std::string& name, const std::string& overrides) {
  dir.file("trust-base.json", kBase);
  return dir.file(name + ".json", R"({"extends": "trust-base.json", "name": ")" + name + "\"" +
                                      (overrides.empty() ? "" : ", " + overrides) + "}");
}

}  // namespace

TEST(TrustNumbers, SummaryAndResultStateTheFp8PrecisionThatRan) {
  test::TempDir dir;
  const auto f = scenario_over_base(dir, "fp8", R"("training": {"global_batch_size": 64, "precision": "fp8"})");
  auto r = run_dtsim({"run", f, "-o", dir.path("o")}, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("global batch 64, fp8, delayed scaling\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("bf16"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(slurp(dir.path("o/result.json")));
  EXPECT_EQ(j["training"]["precision"], "fp8");
  EXPECT_EQ(j["training"]["fp8_recipe"], "delayed");
}

TEST(TrustNumbers, SummaryNamesContextAndExpertDimensions) {
  test::TempDir dir;
  // 64 GPUs: data 2 x context 2 x tensor 4 x pipeline 4.
  const auto cp = scenario_over_base(dir, "cp", R"("cluster": {"nodes": 8},
      "parallelism": {"data": 2, "context": 2, "tensor": 4, "pipeline": 4, "micro_batch_size": 1},
      "training": {"global_batch_size": 8, "attention": "flash"})");
  auto r = run_dtsim({"memory", cp}, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("data 2 x context 2 x tensor 4 x pipeline 4;"), std::string::npos) << r.out;
  const auto ep = scenario_over_base(dir, "ep", R"("model": {"preset": "mixtral-8x7b"}, "cluster": {"nodes": 2},
      "parallelism": {"data": 4, "tensor": 2, "pipeline": 2, "expert": 4, "micro_batch_size": 1},
      "training": {"global_batch_size": 8, "attention": "flash"})");
  r = run_dtsim({"memory", ep}, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("data 4 x tensor 2 x pipeline 2 (expert 4 within data)"), std::string::npos) << r.out;
  const auto folded = scenario_over_base(dir, "folded", R"("model": {"preset": "mixtral-8x7b"}, "cluster": {"nodes": 2},
      "parallelism": {"data": 2, "context": 2, "tensor": 2, "pipeline": 2, "expert": 8, "expert_tensor": 1, "micro_batch_size": 1},
      "training": {"global_batch_size": 8, "attention": "flash"})");
  r = run_dtsim({"memory", folded}, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("data 2 x context 2 x tensor 2 x pipeline 2 (expert 8 within tensor x context x data)"), std::string::npos)
      << r.out;
}

TEST(TrustNumbers, ResultStatesCompressionAndTheAlgorithmAutoChose) {
  test::TempDir dir;
  const auto f = scenario_over_base(dir, "auto-int8",
                                    R"("parallelism": {"data": 8, "micro_batch_size": 4, "all_reduce_algorithm": "auto",
                                        "gradient_compression": "int8"})");
  auto r = run_dtsim({"run", f, "-o", dir.path("o")}, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("gradients: auto algorithm, compression int8; buckets ran as "), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(slurp(dir.path("o/result.json")));
  const auto& p = j["parallelism"];
  EXPECT_EQ(p["gradient_compression"], "int8");
  EXPECT_EQ(p["all_reduce_algorithm"], "auto");
  ASSERT_TRUE(p.contains("gradient_buckets_ran_as")) << p.dump();
  int buckets = 0;
  for (const auto& [how, n] : p["gradient_buckets_ran_as"].items()) {
    EXPECT_EQ(how.find("auto"), std::string::npos) << how;  // what was chosen, not "auto" again
    buckets += n.get<int>();
  }
  EXPECT_EQ(buckets, p["gradient_buckets"].get<int>());
}

TEST(TrustNumbers, CompareReportsThePrecisionDifference) {
  test::TempDir dir;
  const auto bf16 = scenario_over_base(dir, "same", "");
  ASSERT_EQ(run_dtsim({"run", bf16, "-o", dir.path("a")}, dir).code, 0);
  const auto fp8 = dir.file("fp8.json", R"({"extends": "same.json", "name": "same", "training": {"global_batch_size": 64, "precision": "fp8"}})");
  ASSERT_EQ(run_dtsim({"run", fp8, "-o", dir.path("b")}, dir).code, 0);
  const std::string a = dir.path("a/result.json"), b = dir.path("b/result.json");
  auto loose = run_dtsim({"compare", a, b}, dir);
  EXPECT_NE(loose.err.find("/training/precision: \"bf16\" vs \"fp8\""), std::string::npos) << loose.err;
  // Same scenario name (a variant without one is named after its file): --strict then refuses
  // on the configuration itself.
  auto strict = run_dtsim({"compare", a, b, "--strict"}, dir);
  EXPECT_EQ(strict.code, 2) << strict.err;
  EXPECT_NE(strict.err.find("/training/precision"), std::string::npos) << strict.err;
}

TEST(TrustNumbers, FirstMicroBatchOfEveryStepIsLoaded) {
  test::TempDir dir;
  // 4 micro-batches of 16 per step, each 16 x 30 ms / 2 workers = 0.24 s to load: 0.96 s a step.
  const double loaders = 4 * 16 * 0.030 / 2;
  for (const char* steps : {"", R"(, "simulation": {"steps": 5})"}) {
    const auto f = dir.file("s.json", std::string(R"({"extends": ")") + shipped("input-stall-gpt2.json") + "\"" + steps + "}");
    auto r = run_dtsim({"run", f, "--format", "json", "-o", dir.path("o")}, dir);
    ASSERT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_GE(j["step_time_s"].get<double>(), loaders) << steps;
    ASSERT_TRUE(j.contains("stragglers")) << steps;
    // Past the first step, each takes the loaders' time: they never idle, the GPU waits for them.
    const int n = j["stragglers"]["steps"].get<int>();
    EXPECT_NEAR(j["stragglers"]["step_time_p50_s"].get<double>(), loaders, 1e-6) << steps << " of " << n;
    double sum = 0;
    for (const auto& [k, v] : j["breakdown_s"].items()) sum += v.get<double>();
    EXPECT_NEAR(sum, j["step_time_s"].get<double>(), 1e-9);
  }
}

TEST(TrustNumbers, ExpectedBubbleFractionIsTheBubblesShareOfTheStep) {
  test::TempDir dir;
  for (const char* schedule : {"1f1b", "gpipe"})
    for (int m : {4, 8, 16}) {
      const int p = 4;
      const auto f = scenario_over_base(dir, "pp", fmt::format(R"("parallelism": {{"data": 2, "pipeline": {}, "micro_batch_size": 1,
          "pipeline_schedule": "{}"}}, "training": {{"global_batch_size": {}}})", p, schedule, 2 * m));
      auto r = run_dtsim({"memory", f, "--format", "json"}, dir);
      ASSERT_EQ(r.code, 0) << r.err;
      const auto j = nlohmann::json::parse(r.out);
      EXPECT_NEAR(j["parallelism"]["expected_bubble_fraction"].get<double>(), (p - 1.0) / (m + p - 1.0), 1e-12)
          << schedule << " m = " << m;
    }
}

TEST(TrustNumbers, SettingsThatWouldDoNothingAreRefused) {
  test::TempDir dir;
  struct Case {
    std::string overrides, pointer;
  } cases[] = {
      {R"("parallelism": {"data": 8, "micro_batch_size": 4, "gradient_compression": "fp16"})", "/parallelism/gradient_compression"},
      {R"("parallelism": {"data": 8, "micro_batch_size": 4, "gradient_compression": "fp16"},
          "training": {"global_batch_size": 64, "precision": "fp8"})", "/parallelism/gradient_compression"},
      {R"("parallelism": {"data": 8, "micro_batch_size": 4, "topk_ratio": 0.05})", "/parallelism/topk_ratio"},
      {R"("parallelism": {"data": 8, "micro_batch_size": 4, "gradient_compression": "int8", "topk_ratio": 0.05})",
       "/parallelism/topk_ratio"},
  };
  for (const auto& c : cases) {
    const auto f = scenario_over_base(dir, "idle", c.overrides);
    auto r = run_dtsim({"run", f, "-o", dir.path("o")}, dir);
    EXPECT_EQ(r.code, 2) << c.overrides << r.err;
    EXPECT_NE(r.err.find(f + ":" + c.pointer + ": "), std::string::npos) << r.err;
  }
  // Where they do something, they load: fp16 on fp32 gradients, a ratio with top-k.
  for (const char* fine : {R"("parallelism": {"data": 8, "micro_batch_size": 4, "gradient_compression": "fp16"},
                               "training": {"global_batch_size": 64, "precision": "fp32"})",
                           R"("parallelism": {"data": 8, "micro_batch_size": 4, "gradient_compression": "topk", "topk_ratio": 0.05})"}) {
    auto r = run_dtsim({"memory", scenario_over_base(dir, "fine", fine)}, dir);
    EXPECT_EQ(r.code, 0) << fine << r.err;
  }
}

TEST(TrustNumbers, AHeavierLastStageIsImbalanceNotBubbleInEverySchedule) {
  test::TempDir dir;
  // GPT-2's LM head makes the last of 4 stages the slowest. The schedule's own idle, the bubble,
  // does not grow with the micro-batches; waiting for the slow stage, m times per step, does.
  for (const char* schedule : {"1f1b", "gpipe", "zero-bubble-h1"}) {
    double bubble[2], imbalance[2];
    for (int k = 0; k < 2; ++k) {
      const int m = 8 << k;
      const auto f = scenario_over_base(dir, "heavy", fmt::format(R"("parallelism": {{"data": 2, "pipeline": 4,
          "micro_batch_size": 1, "pipeline_schedule": "{}"}}, "training": {{"global_batch_size": {}}})", schedule, 2 * m));
      auto r = run_dtsim({"run", f, "--format", "json", "-o", dir.path("o")}, dir);
      ASSERT_EQ(r.code, 0) << r.err;
      const auto j = nlohmann::json::parse(r.out);
      bubble[k] = j["breakdown_s"]["pipeline_bubble"].get<double>();
      imbalance[k] = j["breakdown_s"]["stage_imbalance"].get<double>();
    }
    EXPECT_NEAR(bubble[1], bubble[0], 0.02 * bubble[0]) << schedule;
    EXPECT_GT(imbalance[1], 1.8 * imbalance[0]) << schedule;
  }
}

// The rank order decides which groups share a node once there are pipeline stages: the summary
// and result.json say which ran (the default, tp-dp-pp, changed on 2026-11-28).
TEST(TrustNumbers, PipelinedRunsStateTheirRankOrder) {
  test::TempDir dir;
  const std::string pipelined = R"("parallelism": {"data": 4, "pipeline": 2, "micro_batch_size": 4)";
  for (const std::string order : {"", "tp-dp-pp", "tp-pp-dp"}) {
    const std::string name = order.empty() ? "default" : order;
    const auto f = scenario_over_base(dir, name, pipelined + (order.empty() ? "" : R"(, "placement": ")" + order + "\"") + "}");
    auto r = run_dtsim({"run", f, "-o", dir.path(name)}, dir);
    ASSERT_EQ(r.code, 0) << r.err;
    const std::string ran = order.empty() ? "tp-dp-pp" : order;
    EXPECT_NE(r.out.find("1 virtual stages, ranks " + ran + ";"), std::string::npos) << r.out;
    EXPECT_EQ(nlohmann::json::parse(slurp(dir.path(name + "/result.json")))["parallelism"]["placement"], ran);
  }
  // Without stages both orders put the same ranks side by side: nothing to state.
  const auto flat = scenario_over_base(dir, "flat", "");
  ASSERT_EQ(run_dtsim({"run", flat, "-o", dir.path("flat")}, dir).code, 0);
  EXPECT_FALSE(nlohmann::json::parse(slurp(dir.path("flat/result.json")))["parallelism"].contains("placement"));
}
