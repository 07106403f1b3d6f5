// Every scenario in scenarios/, run as users run it (`dtsim run`, its own process, the backend the
// scenario names): the breakdown parts in result.json, the text summary and the HTML report are
// each >= 0 and add up to the step time, and the idle time at the gradient sync is at most a step.
// Straggler wait is what slowdowns cost: without a `stragglers` block there is none.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "run_dtsim.hpp"
#include "sim/config/scenario.hpp"

using namespace dtsim;
namespace fs = std::filesystem;

namespace {

using test::Outcome;
using test::run_dtsim;
using test::slurp;

// Runnable scenarios: files that name themselves (the others are bases that scenarios extend).
std::vector<std::string> scenarios() {
  std::vector<std::string> out;
  const fs::path root = fs::path(test::source_dir()) / "scenarios";
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (!e.is_regular_file() || e.path().extension() != ".json") continue;
    const auto j = nlohmann::json::parse(slurp(e.path()), nullptr, false);
    if (j.is_object() && j.contains("name")) out.push_back(fs::relative(e.path(), root).string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

const char* const kParts[] = {"compute",        "exposed_communication", "pipeline_bubble", "stage_imbalance",
                              "optimizer",      "straggler_wait",        "input_stall"};

// "compute: 2.743 s" titles of the HTML report's breakdown bar, by part.
std::map<std::string, double> html_parts(const std::string& html) {
  std::map<std::string, double> out;
  const auto at = html.find("<h2>Where ");
  const auto end = html.find("</svg>", at);
  if (at == std::string::npos || end == std::string::npos) return out;
  const std::string bar = html.substr(at, end - at);
  const std::regex title("<title>([a-z ]+): ([-0-9.e+]+) s</title>");
  for (std::sregex_iterator it(bar.begin(), bar.end(), title), stop; it != stop; ++it) out[(*it)[1]] = std::stod((*it)[2]);
  return out;
}

// "  compute    2.7432 s  98.7%" lines of the text summary, by part.
std::map<std::string, double> text_parts(const std::string& text) {
  std::map<std::string, double> out;
  const std::regex line(R"(\n  (compute|exposed communication|pipeline bubble|stage imbalance|optimizer|straggler wait|input stall|checkpoint|comm interference) +([-0-9.]+) s )");
  for (std::sregex_iterator it(text.begin(), text.end(), line), stop; it != stop; ++it) out[(*it)[1]] = std::stod((*it)[2]);
  return out;
}

double text_number(const std::string& text, const std::string& pattern) {
  std::smatch m;
  return std::regex_search(text, m, std::regex(pattern)) ? std::stod(m[1]) : NAN;
}

class EveryScenario : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST(ScenarioWalk, FindsEveryScenario) {
  // 64 at the time of writing; the walk must not silently lose them.
  EXPECT_GE(scenarios().size(), 60u);
}

TEST_P(EveryScenario, BreakdownPartsArePositiveAndAddUpToTheStep) {
  test::TempDir dir;
  const std::string file = test::source_dir() + "/scenarios/" + GetParam();
  const auto r = run_dtsim({"run", file, "--html", "-o", dir.path("out")}, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(slurp(dir.path("out/result.json")));
  const double step = j.at("step_time_s").get<double>();
  ASSERT_GT(step, 0.0);
  // Nothing slows a task (no slow GPU, jitter or throttle, no skewed router): nothing is straggler
  // wait, whatever the stages' work (an LM head on the last stage is stage imbalance).
  const auto spec = config::load_scenario(file);
  if (!spec.stragglers.enabled && spec.parallelism.expert_skew == 0) {
    EXPECT_EQ(j.at("breakdown_s").at("straggler_wait").get<double>(), 0.0);
  }

  // result.json: to 1e-9.
  double sum = 0;
  for (const char* part : kParts) EXPECT_TRUE(j.at("breakdown_s").contains(part)) << part;
  for (const auto& [part, value] : j.at("breakdown_s").items()) {  // every part, those of cluster.roles too
    const double v = value.get<double>();
    EXPECT_GE(v, 0.0) << part;
    sum += v;
  }
  const std::size_t parts = j.at("breakdown_s").size();
  EXPECT_NEAR(sum, step, 1e-9 * step);

  // The text summary, printed to 4 decimals.
  const auto text = text_parts(r.out);
  ASSERT_EQ(text.size(), parts) << r.out;
  double text_sum = 0;
  for (const auto& [part, v] : text) {
    EXPECT_GE(v, 0.0) << part;
    text_sum += v;
  }
  const double text_step = text_number(r.out, R"(step time +([0-9.]+) s)");
  EXPECT_NEAR(text_sum, text_step, 3.5e-4);

  // The HTML report's bar, to 4 significant digits.
  const auto html = html_parts(slurp(dir.path("out/report.html")));
  ASSERT_EQ(html.size(), parts);
  double html_sum = 0;
  for (const auto& [part, v] : html) {
    EXPECT_GE(v, 0.0) << part;
    html_sum += v;
  }
  EXPECT_NEAR(html_sum, step, 5e-4 * step + 1e-12);

  // Several steps: each GPU's idle time at the gradient sync, per step, is at most a step.
  if (j.contains("stragglers")) {
    EXPECT_LE(j["stragglers"]["sync_wait_mean_s"].get<double>(), step);
    EXPECT_LE(j["stragglers"]["sync_wait_max_s"].get<double>(), step);
    const double text_max = text_number(r.out, R"(idle at the gradient sync: [0-9.]+ s per GPU and step on average, ([0-9.]+) s at most)");
    EXPECT_LE(text_max, text_step + 5e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(Scenarios, EveryScenario, ::testing::ValuesIn(scenarios()), [](const auto& info) {
  std::string name = info.param.substr(0, info.param.size() - 5);  // without ".json"
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
});

namespace {

nlohmann::json run_json(const std::string& scenario) {
  test::TempDir dir;
  const auto r = run_dtsim({"run", test::source_dir() + "/scenarios/" + scenario, "--format", "json", "-o", dir.path("out")}, dir);
  EXPECT_EQ(r.code, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

}  // namespace

TEST(PipelineStraggler, ASlowGpuInAPipelineShowsAsStragglerWaitNotBubble) {
  // GPT-2 XL in 8 stages, GPU 5 at 1.5x, against the same pipeline without it.
  const auto slow = run_json("stragglers/pp8-one-slow-gpu.json");
  const auto calm = run_json("pipeline/gpt2-xl-pp8-calm.json");
  const auto& bs = slow["breakdown_s"];
  const auto& bc = calm["breakdown_s"];
  const double extra = slow["step_time_s"].get<double>() - calm["step_time_s"].get<double>();
  ASSERT_GT(extra, 0.1);
  // The time the slow GPU adds is waiting for it, and only that: without it there is none. The
  // fill and drain, and the wait for the heavier last stage, stay what they were.
  EXPECT_EQ(bc["straggler_wait"].get<double>(), 0.0);
  EXPECT_NEAR(bs["straggler_wait"].get<double>(), extra, 0.1 * extra);
  EXPECT_NEAR(bs["pipeline_bubble"].get<double>(), bc["pipeline_bubble"].get<double>(), 0.1 * bc["pipeline_bubble"].get<double>());
  EXPECT_NEAR(bs["stage_imbalance"].get<double>(), bc["stage_imbalance"].get<double>(), 0.1 * bc["stage_imbalance"].get<double>());
}

TEST(PipelineImbalance, AHeavyLastStageIsStageImbalanceAndTheBubbleStaysTheFillAndDrain) {
  // GPT-2 XL in 8 stages of 6 layers each, nothing slowed: the last stage also runs the LM head (a
  // 1600 x 50257 matrix, GPT-2 XL's sizes from Radford et al. 2019: the weights of ~2.6 layers),
  // so the others wait for it.
  const auto calm = run_json("pipeline/gpt2-xl-pp8-calm.json");
  const auto& b = calm["breakdown_s"];
  const auto& par = calm["parallelism"];
  const auto& layers = par["stage_layers"];
  ASSERT_EQ(layers.size(), 8u);
  for (const auto& l : layers) ASSERT_EQ(l, layers[0]);  // uniform stages: the imbalance is the head
  EXPECT_GT(b["stage_imbalance"].get<double>(), 0.05);
  EXPECT_EQ(b["straggler_wait"].get<double>(), 0.0);
  // (p - 1) micro-batch times of this GPU: its compute over the m micro-batches times (p - 1).
  const double p = par["pipeline"].get<double>(), m = par["micro_batches_per_step"].get<double>();
  const double fill_and_drain = (p - 1) * b["compute"].get<double>() / m;
  EXPECT_NEAR(b["pipeline_bubble"].get<double>() / fill_and_drain, 1.0, 0.10);
}
