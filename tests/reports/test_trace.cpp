// Issue 16 item 4: the Chrome trace as chrome://tracing and Perfetto read it, and the output
// folder holding one run's files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "run_dtsim.hpp"

namespace dtsim {
namespace {

using test::run_dtsim;
using test::slurp;

std::string scenario(const std::string& name) { return test::source_dir() + "/scenarios/" + name; }

nlohmann::json trace_of(const std::string& scenario_file, const test::TempDir& dir) {
  const auto r = run_dtsim({"run", scenario_file, "--trace", "-o", dir.path("o")}, dir);
  EXPECT_EQ(r.code, 0) << r.err;
  return nlohmann::json::parse(slurp(dir.path("o/trace.json")));
}

struct Slice {
  double ts, end;
  std::string name;
};

// Complete ("X") slices by (pid, tid).
std::map<std::pair<int, int>, std::vector<Slice>> tracks_of(const nlohmann::json& trace) {
  std::map<std::pair<int, int>, std::vector<Slice>> out;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X")
      out[{e["pid"].get<int>(), e["tid"].get<int>()}].push_back(
          {e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>(), e["name"].get<std::string>()});
  return out;
}

// Thread names by (pid, tid), from the metadata events.
std::map<std::pair<int, int>, std::string> thread_names(const nlohmann::json& trace) {
  std::map<std::pair<int, int>, std::string> out;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name") out[{e["pid"].get<int>(), e["tid"].get<int>()}] = e["args"]["name"];
  return out;
}

TEST(Trace, AsyncRunHasNoPartiallyOverlappingSlicesOnATrack) {
  // Hogwild: every GPU's update kernels and its pushes and pulls of the others run at once; the
  // old trace put them on one track each, 328 pairs partially overlapping.
  test::TempDir dir;
  const auto tracks = tracks_of(trace_of(scenario("async/hogwild-8gpu.json"), dir));
  std::size_t slices = 0, partial = 0;
  std::string example;
  for (auto [track, v] : tracks) {
    slices += v.size();
    std::sort(v.begin(), v.end(), [](const Slice& a, const Slice& b) { return a.ts != b.ts ? a.ts < b.ts : a.end > b.end; });
    // Properly nested or disjoint: a stack of open slices, each new one ending by its parent's end.
    std::vector<const Slice*> open;
    for (const auto& s : v) {
      while (!open.empty() && open.back()->end <= s.ts) open.pop_back();
      if (!open.empty() && s.end > open.back()->end) {
        if (example.empty())
          example = open.back()->name + " and " + s.name + " on pid " + std::to_string(track.first) + " tid " +
                    std::to_string(track.second);
        ++partial;
      }
      open.push_back(&s);
    }
  }
  EXPECT_GT(slices, 1000u);
  EXPECT_EQ(partial, 0u) << "e.g. " << example;
}

TEST(Trace, SlicesCarryBytesFlopsGroupAndLink) {
  test::TempDir dir;
  const auto trace = trace_of(scenario("gpt2-dp8-a100.json"), dir);
  int compute = 0, collectives = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    ASSERT_TRUE(e.contains("args")) << e.dump();
    const auto& a = e["args"];
    if (e["cat"] == "compute" && e["name"].get<std::string>().rfind("fwd", 0) == 0) {
      ++compute;
      EXPECT_GT(a.value("flops", 0.0), 0) << e.dump();
      EXPECT_GT(a.value("bytes", 0.0), 0) << e.dump();
    }
    if (a.contains("op")) {  // a collective: the gradient all-reduce over the node's 8 GPUs
      ++collectives;
      EXPECT_GT(a.value("bytes", 0.0), 0) << e.dump();
      EXPECT_TRUE(a.contains("algorithm")) << e.dump();
      EXPECT_TRUE(a.contains("group")) << e.dump();
      EXPECT_EQ(a.value("group_gpus", 0), 8) << e.dump();
      EXPECT_EQ(a.value("link", ""), "intra-node") << e.dump();
    }
  }
  EXPECT_GT(compute, 0);
  EXPECT_GT(collectives, 0);
}

TEST(Trace, InputLoadersHaveTheirOwnTrack) {
  test::TempDir dir;
  const auto trace = trace_of(scenario("input-stall-gpt2.json"), dir);
  const auto names = thread_names(trace);
  int loads = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const auto track = names.at({e["pid"].get<int>(), e["tid"].get<int>()});
    const bool loader = e["cat"] == "input";
    loads += loader ? 1 : 0;
    if (loader) {
      EXPECT_EQ(track.rfind("data loader", 0), 0u) << e.dump() << " on " << track;
      EXPECT_EQ(e["args"].value("samples", 0), 16) << e.dump();  // a micro-batch, 8 KiB a sample
      EXPECT_EQ(e["args"].value("bytes", 0.0), 16 * 8192.0) << e.dump();
    }
    else EXPECT_EQ(track.find("data loader"), std::string::npos) << e.dump() << " on " << track;
  }
  EXPECT_GT(loads, 0);
}

// Each activation or gradient sent between pipeline stages is an arrow from the task that made it
// to the task on the next stage that waited for it, each end inside its slice (as Perfetto binds).
TEST(Trace, PipelineTransfersAreArrowsBetweenStages) {
  test::TempDir dir;
  const auto trace = trace_of(scenario("pipeline/schedules-1f1b.json"), dir);  // 8 stages, 16 micro-batches
  const auto tracks = tracks_of(trace);
  auto inside = [&](const nlohmann::json& e) {
    const auto& v = tracks.at({e["pid"].get<int>(), e["tid"].get<int>()});
    const double ts = e["ts"];
    return std::any_of(v.begin(), v.end(), [&](const Slice& x) { return x.ts <= ts && ts <= x.end; });
  };
  std::map<int, nlohmann::json> starts;
  int arrows = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "s") starts[e["id"].get<int>()] = e;
    if (e["ph"] != "f") continue;
    ++arrows;
    const auto& s = starts.at(e["id"].get<int>());
    EXPECT_EQ(std::abs(s["pid"].get<int>() - e["pid"].get<int>()), 1) << e.dump();  // neighbouring stages
    EXPECT_LT(s["ts"].get<double>(), e["ts"].get<double>()) << e.dump();
    EXPECT_TRUE(inside(s) && inside(e)) << e.dump();
  }
  EXPECT_EQ(arrows, 2 * 7 * 16);  // activations forward and gradients back, over 7 stage boundaries
}

// Each stage's memory is a counter track: it rises with each forward's activations and falls back
// to where it started by the step's end.
TEST(Trace, EachStageHasAMemoryCounter) {
  test::TempDir dir;
  const auto trace = trace_of(scenario("pipeline/schedules-1f1b.json"), dir);
  std::map<int, std::vector<double>> memory;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "C" && e["name"] == "memory") memory[e["pid"].get<int>()].push_back(e["args"]["GiB"].get<double>());
  ASSERT_EQ(memory.size(), 8u);
  for (const auto& [pid, v] : memory) {
    EXPECT_GT(*std::max_element(v.begin(), v.end()), v.front() + 0.1) << pid;
    EXPECT_NEAR(v.back(), v.front(), 1e-6) << pid;
  }
}

// A trace draws one GPU per stage; the others it stands for are named, in the file's metadata and
// on each process.
TEST(Trace, DrawnRanksSayWhichGpusTheyStandFor) {
  test::TempDir dir;
  const auto trace = trace_of(scenario("gpt2-dp64-a100.json"), dir);
  EXPECT_EQ(trace["otherData"]["drawn_ranks"], nlohmann::json({{"0", "pipeline stage 0; stands for GPUs 0-63"}}));
  int labels = 0;
  for (const auto& e : trace["traceEvents"])
    labels += e["name"] == "process_labels" && e["args"]["labels"] == "pipeline stage 0; stands for GPUs 0-63";
  EXPECT_EQ(labels, 1);
}

TEST(Trace, StaleTraceAndReportAreRemovedWhenARunDoesNotRewriteThem) {
  test::TempDir dir;
  const std::string out = dir.path("o");
  auto r = run_dtsim({"run", scenario("default.json"), "--trace", "--html", "-o", out}, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_TRUE(std::filesystem::exists(out + "/trace.json"));
  ASSERT_TRUE(std::filesystem::exists(out + "/report.html"));
  // Bad input writes nothing and removes nothing.
  const std::string bad = dir.file("bad.json", R"({"schema_version": 1, "name": "x", "model": {"preset": "no-such-model"}})");
  r = run_dtsim({"run", bad, "-o", out}, dir);
  ASSERT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(std::filesystem::exists(out + "/trace.json"));
  EXPECT_TRUE(std::filesystem::exists(out + "/report.html"));
  // Only the report this time: the earlier trace would describe another run.
  r = run_dtsim({"run", scenario("default.json"), "--html", "-o", out}, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out + "/trace.json"));
  EXPECT_TRUE(std::filesystem::exists(out + "/report.html"));
  r = run_dtsim({"run", scenario("default.json"), "-o", out}, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out + "/report.html"));
  EXPECT_TRUE(std::filesystem::exists(out + "/result.json"));
  // Something that is not a regular file under the name is not dtsim's to remove.
  std::filesystem::create_directory(out + "/trace.json");
  r = run_dtsim({"run", scenario("default.json"), "-o", out}, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::is_directory(out + "/trace.json"));
}

}  // namespace
}  // namespace dtsim
