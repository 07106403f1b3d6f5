// Issue 16 through the command line: the capacity plan in the text summary, `dtsim list`, and
// error paths as written.
#include <gtest/gtest.h>
#include <sys/wait.h>

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

// Runs dtsim in `cwd` (the temp dir unless given).
Outcome dtsim_cli(const std::string& args, const test::TempDir& dir, const std::string& cwd = "") {
  std::string out = dir.path("stdout.txt"), err = dir.path("stderr.txt");
  std::string cmd = "cd " + (cwd.empty() ? dir.path() : cwd) + " && " + std::string(DTSIM_BINARY) + " " + args + " > " +
                    out + " 2> " + err;
  int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
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
