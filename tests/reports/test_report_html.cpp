// Issue 16 item 3: report.html as a teacher reads it, and `compare --html`.
#include <gtest/gtest.h>

#include <map>
#include <regex>

#include "reports/reports.hpp"
#include "run_dtsim.hpp"
#include "sim/config/scenario.hpp"
#include "sim/results/result.hpp"

namespace dtsim {
namespace {

using test::run_dtsim;
using test::slurp;

std::string scenario(const std::string& name) { return test::source_dir() + "/scenarios/" + name; }

std::string report_of(const std::string& scenario_file, const test::TempDir& dir, const std::string& out = "o") {
  const auto r = run_dtsim({"run", scenario_file, "--html", "-o", dir.path(out)}, dir);
  EXPECT_EQ(r.code, 0) << r.err;
  return slurp(dir.path(out + "/report.html"));
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The timeline's <svg> element.
std::string timeline_svg(const std::string& html) {
  const auto at = html.find("<svg", html.find("<h2>Timeline"));
  return at == std::string::npos ? "" : html.substr(at, html.find("</svg>", at) - at);
}

// The legend of the timeline names the colour of waits made late by communication interference
// where the run's stack has it, and only there.
TEST(HtmlReport, LegendNamesInterferenceWhereTheStackHasIt) {
  test::TempDir dir;
  auto legend = [](const std::string& html) {
    const auto at = html.find("<p class='legend'>");
    return at == std::string::npos ? "" : html.substr(at, html.find("</p>", at) - at);
  };
  EXPECT_NE(legend(report_of(scenario("stacks/llama3-8b-tp4-h100-te-tp-overlap.json"), dir, "a")).find("communication interference"),
            std::string::npos);
  const auto plain = legend(report_of(scenario("default.json"), dir, "b"));
  EXPECT_NE(plain.find("pipeline bubble"), std::string::npos);
  EXPECT_EQ(plain.find("communication interference"), std::string::npos);
}

TEST(HtmlReport, DrawsEveryGpuOfThePipelineAndSaysWhichAreSimulated) {
  test::TempDir dir;
  const auto html = report_of(scenario("pipeline/gpt3-175b-1f1b.json"), dir);
  const auto svg = timeline_svg(html);
  // tensor 8 x pipeline 8: one GPU per stage is simulated, the tensor-parallel others run its tasks.
  for (int gpu : {0, 8, 16, 24, 32, 40, 48, 56})
    EXPECT_NE(svg.find(">GPU " + std::to_string(gpu) + "<"), std::string::npos) << gpu;
  EXPECT_EQ(count(svg, "class='gpu'"), 8u);
  EXPECT_NE(html.find("simulates 8 of the 64 GPUs in the cluster"), std::string::npos);
  EXPECT_NE(html.find("All 8 simulated GPUs are drawn"), std::string::npos);
  // Self-contained: nothing to fetch.
  EXPECT_EQ(html.find("<script src"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
}

TEST(HtmlReport, SaysHowItSamplesWhenThereAreTooManyGpus) {
  // Asynchronous updates simulate every replica: 72 GPUs, more than the page draws.
  test::TempDir dir;
  const auto file = dir.file("async72.json", R"({"extends": ")" + scenario("gpt2-dp8-a100.json") + R"(", "name": "async-72",
    "cluster": {"nodes": 9}, "parallelism": {"data": 72, "updates": "async"}, "training": {"global_batch_size": 1152},
    "simulation": {"steps": 2, "backend": "analytical"}})");
  const auto html = report_of(file, dir);
  const auto svg = timeline_svg(html);
  EXPECT_NE(html.find("Sampled: 64 of the 72 simulated GPUs are drawn"), std::string::npos);
  EXPECT_EQ(count(svg, "class='gpu'"), 64u);
  EXPECT_NE(svg.find(">GPU 0<"), std::string::npos);
  EXPECT_NE(svg.find(">GPU 71<"), std::string::npos);
}

TEST(HtmlReport, RowsWithMoreTasksThanPixelsAreDrawnByPixelColumnAndSaySo) {
  // Interleaved 1F1B: each GPU's stage-to-stage transfers, in and out for every virtual stage and
  // micro-batch, are more than its row has pixels.
  test::TempDir dir;
  const auto html = report_of(scenario("pipeline/gpt3-175b-interleaved.json"), dir);
  const auto svg = timeline_svg(html);
  EXPECT_NE(html.find("each pixel column shows what filled most of it"), std::string::npos);
  EXPECT_NE(svg.find("<title>mostly stage-to-stage transfer"), std::string::npos);
  EXPECT_EQ(count(svg, "class='gpu'"), 8u);
  EXPECT_LE(count(svg, "<rect"), 8u * 4u * 1101u);  // at most a rectangle per pixel column of each lane
}

TEST(HtmlReport, ColoursIdleTimeByItsCause) {
  test::TempDir dir;
  // A pipeline: bubbles while it fills and drains, the stages' uneven work, transfers in flight.
  const auto pipeline = timeline_svg(report_of(scenario("pipeline/gpt3-175b-1f1b.json"), dir, "p"));
  for (const char* c : {"idle-pipeline-bubble", "idle-stage-imbalance", "idle-exposed-communication"})
    EXPECT_NE(pipeline.find(std::string("class='idle ") + c + "'"), std::string::npos) << c;
  // Loaders slower than the GPU.
  const auto input = timeline_svg(report_of(scenario("input-stall-gpt2.json"), dir, "i"));
  EXPECT_NE(input.find("class='idle idle-input-stall'"), std::string::npos);
  // One throttled GPU: the others wait for it at the all-reduce.
  const auto file = dir.file("slow.json", R"({"extends": ")" + scenario("gpt2-dp8-a100.json") + R"(", "name": "slow",
    "stragglers": {"slow_gpus": [{"gpu": 3, "slowdown": 1.5}]}})");
  const auto slow = timeline_svg(report_of(file, dir, "s"));
  EXPECT_NE(slow.find("class='idle idle-straggler-wait'"), std::string::npos);
}

TEST(HtmlReport, IdleSpansAddUpToTheBreakdownOfTheirGpu) {
  // Where the page colours idle time agrees with the breakdown's totals for that GPU.
  auto s = config::load_scenario(scenario("pipeline/gpt3-175b-1f1b.json"));
  s.backend = config::Backend::Analytical;
  const auto r = results::simulate(s);
  std::vector<replay::IdleSpan> spans;
  const auto b = replay::step_breakdown(r.replayed(), r.timeline, r.work_seconds, r.work_comm_seconds,
                                        {r.breakdown.rank, r.timeline.makespan, &spans});
  std::map<replay::IdleCause, double> sum;
  double last = 0;
  for (const auto& span : spans) {
    EXPECT_GE(span.start, last - 1e-12);  // in time order, not overlapping
    EXPECT_GT(span.end, span.start);
    last = span.end;
    sum[span.cause] += span.end - span.start;
  }
  const double tol = 1e-9 * r.timeline.makespan;
  EXPECT_NEAR(sum[replay::IdleCause::PipelineBubble], b.pipeline_bubble, tol);
  EXPECT_NEAR(sum[replay::IdleCause::StageImbalance], b.stage_imbalance, tol);
  EXPECT_NEAR(sum[replay::IdleCause::StragglerWait], b.straggler_wait, tol);
  EXPECT_NEAR(sum[replay::IdleCause::InputStall], b.input_stall, tol);
  EXPECT_GT(b.pipeline_bubble, 0);
}

TEST(HtmlReport, MemoryBarsShowTheDeviceCapacity) {
  test::TempDir dir;
  const auto html = report_of(scenario("pipeline/gpt3-175b-1f1b.json"), dir);
  EXPECT_EQ(count(html, "class='capacity'"), 8u);  // one per stage's bar
  EXPECT_NE(html.find("capacity 80 GiB"), std::string::npos);
}

TEST(HtmlReport, AxisLabelsFitTheirPicture) {
  test::TempDir dir;
  const auto svg = timeline_svg(report_of(scenario("pipeline/gpt3-175b-1f1b.json"), dir));
  std::smatch m;
  ASSERT_TRUE(std::regex_search(svg, m, std::regex("width='([0-9.]+)'")));
  const double width = std::stod(m[1]);
  // Each time label, about 6.5 px per character of its 11 px text, inside the picture.
  const std::regex label("<text x='([0-9.]+)' y='12'( text-anchor='middle')?[^>]*>([^<]+ s)</text>");
  int labels = 0;
  for (std::sregex_iterator it(svg.begin(), svg.end(), label), stop; it != stop; ++it, ++labels) {
    const double x = std::stod((*it)[1]), w = 6.5 * static_cast<double>((*it)[3].length());
    const bool middle = (*it)[2].matched;
    EXPECT_GE(middle ? x - w / 2 : x, 0) << (*it)[0];
    EXPECT_LE(middle ? x + w / 2 : x + w, width) << (*it)[0];
  }
  EXPECT_EQ(labels, 11);
}

TEST(HtmlCompare, PutsGpipeAnd1f1bSideBySide) {
  test::TempDir dir;
  // GPipe with its report.html, 1F1B without.
  for (const char* s : {"gpipe", "1f1b"}) {
    std::vector<std::string> args{"run", scenario(std::string("pipeline/gpt3-175b-") + s + ".json"), "-o", dir.path(s)};
    if (std::string(s) == "gpipe") args.push_back("--html");
    const auto r = run_dtsim(args, dir);
    ASSERT_EQ(r.code, 0) << r.err;
  }
  const auto r = run_dtsim({"compare", dir.path("gpipe/result.json"), dir.path("1f1b/result.json"), "--html", dir.path("cmp.html")}, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("wrote " + dir.path("cmp.html")), std::string::npos) << r.out;
  const auto html = slurp(dir.path("cmp.html"));
  EXPECT_EQ(count(html, "<div class='side'>"), 2u);
  const auto left = html.find("gpt3-175b-pp8-gpipe</h2>"), right = html.find("gpt3-175b-pp8-1f1b</h2>");
  ASSERT_NE(left, std::string::npos);
  ASSERT_NE(right, std::string::npos);
  EXPECT_LT(left, right);  // baseline on the left
  EXPECT_NE(html.find("/parallelism/pipeline_schedule: &quot;gpipe&quot; vs &quot;1f1b&quot;"), std::string::npos);
  EXPECT_EQ(count(html, "<title>pipeline bubble: "), 2u);  // each one's breakdown
  EXPECT_EQ(count(html, "class='capacity'"), 2u);          // each one's memory against the device
  EXPECT_NE(html.find("does not fit"), std::string::npos);  // GPipe keeps all 32 micro-batches' activations
  EXPECT_EQ(html.find("https://"), std::string::npos);
  // A link to the run's own timeline where its folder has one, relative to the page.
  EXPECT_EQ(count(html, "class='timeline'"), 1u);
  EXPECT_NE(html.find("href='gpipe/report.html'"), std::string::npos);
}

TEST(HtmlCompare, BadOutputPathIsRefusedBeforeReading) {
  test::TempDir dir;
  std::filesystem::create_directory(dir.path("folder"));
  const auto r = run_dtsim({"compare", dir.path("missing.json"), dir.path("missing.json"), "--html", dir.path("folder")}, dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("not a regular file"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace dtsim
