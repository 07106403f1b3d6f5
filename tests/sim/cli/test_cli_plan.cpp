// Issue 16 through the command line: the capacity plan in the text summary, `dtsim list`, and
// error paths as written.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "run_dtsim.hpp"

using namespace dtsim;

namespace {

using test::Outcome;
using test::slurp;

// Runs dtsim on these space-separated arguments (no shell) in `cwd`, the temp dir unless given.
Outcome dtsim_cli(const std::string& args, const test::TempDir& dir, const std::string& cwd = "") {
  std::vector<std::string> argv;
  std::istringstream words(args);
  for (std::string w; words >> w;) argv.push_back(w);
  return test::run_dtsim(argv, dir, cwd.empty() ? dir.path() : cwd);
}

std::string scenario(const std::string& name) { return test::source_dir() + "/scenarios/" + name; }

}  // namespace

TEST(CliPlan, GptThreeOnOneA100SaysYearsThatItDoesNotFitAndTheFewestGpus) {
  test::TempDir dir;
  auto r = dtsim_cli("run " + scenario("planning/gpt3-175b-one-a100.json") + " -o " + dir.path("out"), dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("plan: 95368 steps (3e+11 tokens) take "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" years (no failures"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("DOES NOT FIT"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fewest GPUs that fit: 40 (data 1 x tensor 8 x pipeline 5"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("at $1.89 per GPU-hour (device default)"), std::string::npos) << r.out;
  // The same in `dtsim memory`, which simulates no time.
  auto m = dtsim_cli("memory " + scenario("planning/gpt3-175b-one-a100.json") + " --format json", dir);
  ASSERT_EQ(m.code, 0) << m.err;
  auto j = nlohmann::json::parse(m.out);
  EXPECT_EQ(j["plan"]["fewest_gpus_that_fit"]["gpus"], 40);
  EXPECT_FALSE(j["memory"]["fits"].get<bool>());
}

TEST(CliList, OneLinePerEntryWithWhatTellsThemApart) {
  test::TempDir dir;
  auto m = dtsim_cli("list models", dir);
  ASSERT_EQ(m.code, 0) << m.err;
  // GPT-3: 96 x 12 h^2 (+ biases, layer norms) + 50,257 x 12,288 embeddings + 2,048 positions = 174.6B.
  // (The name column is as wide as the longest preset name.)
  const auto gpt3 = m.out.find("\ngpt3-175b ");
  ASSERT_NE(gpt3, std::string::npos) << m.out;
  EXPECT_EQ(m.out.find(" transformer  174604.26 M parameters (174.6B), layers 96, seq_len 2048\n", gpt3),
            m.out.find('\n', gpt3 + 1) - std::string(" transformer  174604.26 M parameters (174.6B), layers 96, seq_len 2048").size())
      << m.out;
  auto d = dtsim_cli("list devices", dir);
  EXPECT_NE(d.out.find(" 312 TFLOP/s bf16, 80 GiB at 2039 GB/s, 400 W, $1.89/GPU-hour\n"), std::string::npos)
      << d.out;
  auto c = dtsim_cli("list clusters", dir);
  // The name column is as wide as the longest cluster preset's name.
  const auto h100 = c.out.find("\ndgx-h100 ");
  ASSERT_NE(h100, std::string::npos) << c.out;
  const auto what = c.out.find_first_not_of(' ', h100 + 9);
  EXPECT_EQ(c.out.substr(what, c.out.find('\n', what) - what),
            "8 GPUs per node, nvswitch 450 GBps per GPU; 8 x 50 GBps NICs per node, fat-tree; "
            "nodes: set cluster.nodes; sets no device (give hardware.device)")
      << c.out;
  auto s = dtsim_cli("list scenarios", dir);
  EXPECT_NE(s.out.find("planning/gpt3-175b-one-a100.json"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("gpt3-175b on 1 x a100-sxm-80gb (data 1, tensor 1, pipeline 1)\n"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("base/dgx-a100.json"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("a base for \"extends\""), std::string::npos) << s.out;
}

TEST(CliList, ClusterPresetSaysItSetsNoDevice) {
  test::TempDir dir;
  dir.file("nodev.json", R"({"schema_version": 1, "name": "x", "model": {"preset": "gpt2"},
    "cluster": {"preset": "dgx-h100", "nodes": 1}, "parallelism": {}, "training": {"global_batch_size": 8}})");
  auto r = dtsim_cli("run nodev.json -o out", dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("/hardware: required key is missing: cluster.preset \"dgx-h100\" sets the cluster, not the device; "
                       "give hardware.device"),
            std::string::npos)
      << r.err;
}

TEST(CliErrors, PathsAsWrittenNotBaseNames) {
  test::TempDir dir;
  // Two files named scenario.json: the error must say which one.
  dir.file("base/scenario.json", std::string(test::kValidScenario).replace(std::string(test::kValidScenario).find("\"gpt2\""), 6,
                                                                           "\"gpt2\", \"num_layerz\": 3"));
  dir.file("runs/scenario.json", R"({"extends": "../base/scenario.json", "name": "child"})");
  // A sibling folder's base is outside runs/: followed only with --allow-outside (issue 25).
  auto r = dtsim_cli("run runs/scenario.json -o out --allow-outside", dir);
  EXPECT_EQ(r.code, 2);
  // The base's path as the child's "extends" names it, from where the user ran dtsim.
  EXPECT_NE(r.err.find("error: base/scenario.json:/model/num_layerz: unknown key (did you mean \"num_layers\"?)"),
            std::string::npos)
      << r.err;
  auto bad = dtsim_cli("run ./runs/../runs/missing.json -o out", dir);
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("error: runs/missing.json: no such file"), std::string::npos) << bad.err;
}
