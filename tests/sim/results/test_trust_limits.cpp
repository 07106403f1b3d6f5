// Issue 25 (Trust 2), limits: the fewest-GPUs search counted by the budget, byte counts past what
// result.json can hold, preset names too long for a file name, and the temporaries a SIGKILL left.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "run_dtsim.hpp"
#include "sim/config/scenario.hpp"
#include "sim/results/budget.hpp"
#include "sim/results/capacity.hpp"
#include "strategies/plan.hpp"

using namespace dtsim;
namespace fs = std::filesystem;

namespace {

std::string scenario(const std::string& name) { return test::source_dir() + "/scenarios/" + name; }

// GPT-3 175B, tensor 8 x pipeline 8, GPipe (scenarios/pipeline/gpt3-175b-gpipe.json) at this batch.
config::Scenario gpipe_at(const test::TempDir& dir, int batch) {
  const auto f = dir.file("gpipe.json", R"({"extends": ")" + scenario("pipeline/gpt3-175b-gpipe.json") +
                                            R"(", "training": {"global_batch_size": )" + std::to_string(batch) + "}}");
  return config::load_scenario(f);
}

}  // namespace

// The shipped GPipe scenario at batch 2,048 planned tens of millions of tasks (182 s) to find
// its answer: every forward of thousands of micro-batches, for one candidate after another.
TEST(FewestGpusSearch, GpipeAtBatch2048FindsItsAnswerWithinTheBudget) {
  test::TempDir dir;
  const auto s = gpipe_at(dir, 2048);
  results::FitSearch report;
  const auto fit = results::fewest_gpus_that_fit(s, 1 << 16, results::kMaxSeconds, &report);
  ASSERT_TRUE(fit) << report.stopped;
  EXPECT_EQ(report.stopped, "");
  EXPECT_LE(fit->peak_bytes, s.device.memory_bytes);
  EXPECT_LE(report.spent_s, results::kMaxSeconds);
  EXPECT_LT(report.planned_tasks, 2e6);
}

// The search lays its plans out without building their task graphs (strategies::plan_layout,
// the same memory as the full plan), so a scenario that does not fit answers at once: the same
// 256 GPUs as when each plan was built (issue 28 item 4: 2 s of CPU before, 0.3 s after).
TEST(FewestGpusSearch, LaysItsPlansOutWithoutBuildingThem) {
  test::TempDir dir;
  results::FitSearch report;
  const auto fit = results::fewest_gpus_that_fit(gpipe_at(dir, 2048), 1 << 16, results::kMaxSeconds, &report);
  ASSERT_TRUE(fit) << report.stopped;
  EXPECT_EQ(fit->gpus, 256);
  EXPECT_EQ(report.planned_tasks, 0);
}

// GPipe's activations grow by the same amount with every micro-batch: the search's line through
// two small plans gives the answer the full plans give (batch 256, where planning them is cheap):
// tensor 8 x pipeline 7 with full recomputation needs 81.51 GiB on its last stage, which holds the
// tied output layer's own copy of the table (79.98 GiB before that copy was counted), so 64.
TEST(FewestGpusSearch, GpipeAnswerIsTheOneFullPlansGive) {
  test::TempDir dir;
  const auto fit = results::fewest_gpus_that_fit(gpipe_at(dir, 256));
  ASSERT_TRUE(fit);
  EXPECT_EQ(fit->gpus, 64);
}

// The search's premise: under GPipe every micro-batch adds the same activations to each stage,
// from the first on (GPT-3, tensor 8 x pipeline 8, full recomputation as the search tries it too).
TEST(FewestGpusSearch, GpipeActivationsGrowAlikeWithEveryMicroBatch) {
  test::TempDir dir;
  const auto s = gpipe_at(dir, 32);
  models::BuildOptions opts{1, strategies::activation_bytes(s.training.precision), s.training.attention, 8, true};
  const auto g = s.model.build(opts);
  for (auto rc : {s.parallelism.recompute, strategies::Recompute::Full}) {
    auto p = s.parallelism;
    p.recompute = rc;
    auto stages = [&](std::int64_t micro) {
      auto t = s.training;
      t.global_batch = micro;
      return strategies::plan_training(g, p, t, s.host).stage_memory;
    };
    const auto one = stages(1), two = stages(2), many = stages(32);
    ASSERT_EQ(many.size(), 8u);
    for (std::size_t i = 0; i < many.size(); ++i)
      EXPECT_NEAR(many[i].activations, one[i].activations + 31 * (two[i].activations - one[i].activations),
                  1e-9 * many[i].activations) << "stage " << i;
  }
}

// A search its budget cannot pay for ends without an answer and says how far it got, having
// spent no more than it was given.
TEST(FewestGpusSearch, ASearchPastItsBudgetStopsAndSaysWhere) {
  test::TempDir dir;
  results::FitSearch report;
  const auto fit = results::fewest_gpus_that_fit(gpipe_at(dir, 2048), 1 << 16, 0.05, &report);
  EXPECT_FALSE(fit);
  EXPECT_LE(report.spent_s, 0.05);
  EXPECT_NE(report.stopped.find("none on fewer than"), std::string::npos) << report.stopped;
  EXPECT_NE(report.stopped.find("budget"), std::string::npos) << report.stopped;
}

// Byte counts go out as whole numbers; one past 2^63 used to come out as 9223372036854775808.
TEST(ByteCounts, PastWhatAByteCountHoldsAreAnInputError) {
  test::TempDir dir;
  const auto f = dir.file("huge.json", R"({"extends": ")" + scenario("default.json") + R"(",
      "model": {"seq_len": 10000000, "hidden_size": 1000000, "num_heads": 25},
      "parallelism": {"micro_batch_size": 1000000}, "training": {"global_batch_size": 16000000}})");
  const auto r = test::run_dtsim({"memory", f, "--format", "json"}, dir);
  EXPECT_EQ(r.code, 2) << r.err << r.out;
  EXPECT_NE(r.err.find("error: " + f + ":/parallelism/micro_batch_size: the activations of one GPU come to"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("more than a byte count holds"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

// A name longer than a file name may be reached the file system and came back as exit 1 with
// the install path in the message.
TEST(PresetNames, TooLongForAFileNameAreRefusedWithoutTheInstallPath) {
  test::TempDir dir;
  const std::string name(300, 'a');
  const auto model = dir.file("model.json", R"({"extends": ")" + scenario("default.json") + R"(", "model": {"preset": ")" + name + "\"}}");
  const auto device = dir.file("device.json", R"({"extends": ")" + scenario("default.json") + R"(", "hardware": {"device": ")" + name + "\"}}");
  for (const auto& args : std::vector<std::vector<std::string>>{{"memory", model},
                                                                {"memory", device},
                                                                {"realrun", "--model", name},
                                                                {"profile", "--model", name, "-o", dir.path("t.json")}}) {
    const auto r = test::run_dtsim(args, dir);
    EXPECT_EQ(r.code, 2) << args[0] << " " << args[1] << ": " << r.err;
    EXPECT_NE(r.err.find("at most 128 characters"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find(test::source_dir()), std::string::npos) << r.err;
  }
}

// A process killed by SIGKILL cannot remove its temporaries (up to the size of a trace): the next
// write to the folder removes those of processes that are gone, and nothing else.
TEST(Temporaries, ThoseOfDeadProcessesAreRemovedAtTheNextWrite) {
  test::TempDir dir;
  const std::string out = dir.path("out");
  fs::create_directories(out);
  const pid_t dead = fork();
  if (dead == 0) _exit(0);
  int status = 0;
  ASSERT_EQ(waitpid(dead, &status, 0), dead);
  auto plant = [&](const std::string& name) { return dir.file("out/" + name, std::string(1 << 20, 'x')); };
  const auto stale = plant(".result.json." + std::to_string(dead) + ".0123456789abcdef.tmp");
  const auto stale_trace = plant(".trace.json." + std::to_string(dead) + ".fedcba9876543210.tmp");
  const auto live = plant(".result.json." + std::to_string(getpid()) + ".0123456789abcdef.tmp");  // a writer still at work
  const auto other = plant(".notes.tmp");
  const auto r = test::run_dtsim({"run", scenario("gpt2-dp8-a100.json"), "-o", dir.path("out")}, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(out + "/result.json"));
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_FALSE(fs::exists(stale_trace));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(other));
}
