// Issue 31, the CI engineer: `run --require-fit`, a variant's own output folder, `collective
// --format nccl-tests`, and docs/ci.md's recipe run as written.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "run_dtsim.hpp"

using namespace dtsim;
using test::run_dtsim;

namespace {

// GPT-3 175B data-parallel on 8 A100s: every GPU holds the whole model and its Adam state.
const char* kTooBig = R"({"schema_version": 1, "name": "too-big", "model": {"preset": "gpt3-175b"},
  "hardware": {"device": "a100-sxm-80gb"}, "cluster": {"preset": "dgx-a100", "nodes": 1},
  "parallelism": {"data": 8, "micro_batch_size": 1}, "training": {"global_batch_size": 8},
  "simulation": {"backend": "analytical"}})";

std::vector<std::string> fields(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> f;
  for (std::string w; in >> w;) f.push_back(w);
  return f;
}

}  // namespace

TEST(RequireFit, ExitsThreeAndSaysByHowMuch) {
  test::TempDir dir;
  const std::string s = dir.file("too-big.json", kTooBig);
  const auto r = run_dtsim({"run", s, "-o", dir.path("out"), "--require-fit"}, dir);
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_TRUE(std::regex_search(r.err, std::regex(R"(DOES NOT FIT: GPU \d+ needs [0-9.]+ GiB, the device has 80\.00 GiB \([0-9.]+ GiB, \d+% over\))")))
      << r.err;
  EXPECT_TRUE(std::filesystem::exists(dir.path("out/result.json"))) << "the evidence stays for the CI job";
  const auto fits = run_dtsim({"run", test::source_dir() + "/scenarios/gpt2-dp8-a100.json", "-o", dir.path("fits"), "--require-fit"}, dir);
  EXPECT_EQ(fits.code, 0) << fits.err;
}

TEST(RequireFit, WithoutItTheSummaryShowsNoRatesAsAchievable) {
  test::TempDir dir;
  const std::string s = dir.file("too-big.json", kTooBig);
  const auto r = run_dtsim({"run", s, "-o", dir.path("out")}, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("*** DOES NOT FIT: ", 0), 0u) << "the first line says so:\n" << r.out;
  EXPECT_EQ(r.out.find("MFU "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("samples/s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("throughput     not achievable: does not fit"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nnot achievable: does not fit; the plan below is what it would take with enough memory\nplan: "),
            std::string::npos) << r.out;
  // result.json keeps its fields and says plainly that they are not achievable.
  const auto j = nlohmann::json::parse(test::slurp(dir.path("out/result.json")));
  EXPECT_EQ(j["achievable"], false);
  EXPECT_EQ(j["memory"]["fits"], false);
  EXPECT_GT(j["memory"]["shortfall_bytes"].get<double>(), 0);
  EXPECT_EQ(j["memory"]["shortfall_bytes"].get<double>(),
            j["memory"]["peak_bytes"].get<double>() - j["memory"]["capacity_bytes"].get<double>());
  EXPECT_TRUE(j.contains("step_time_s") && j.contains("throughput") && j["flops"].contains("mfu"));
  // A plan that fits has neither flag: its bytes are as before.
  const auto ok = run_dtsim({"run", test::source_dir() + "/scenarios/gpt2-dp8-a100.json", "-o", dir.path("fits")}, dir);
  ASSERT_EQ(ok.code, 0) << ok.err;
  const auto k = nlohmann::json::parse(test::slurp(dir.path("fits/result.json")));
  EXPECT_FALSE(k.contains("achievable"));
  EXPECT_FALSE(k["memory"].contains("shortfall_bytes"));
  EXPECT_NE(ok.out.find("MFU "), std::string::npos);
}

TEST(Variants, AVariantWithoutANameWritesItsOwnFolder) {
  test::TempDir dir;
  dir.file("parent.json", test::kValidScenario);  // name "test"
  dir.file("child.json", R"({"extends": "parent.json", "parallelism": {"micro_batch_size": 2}})");
  dir.file("named.json", R"({"extends": "parent.json", "name": "mine"})");
  ASSERT_EQ(run_dtsim({"run", "parent.json"}, dir, dir.path()).code, 0);
  const auto child = run_dtsim({"run", "child.json"}, dir, dir.path());
  ASSERT_EQ(child.code, 0) << child.err;
  ASSERT_EQ(run_dtsim({"run", "named.json"}, dir, dir.path()).code, 0);
  ASSERT_TRUE(std::filesystem::exists(dir.path("out/child/result.json"))) << "the child's results went elsewhere";
  const auto parent_result = nlohmann::json::parse(test::slurp(dir.path("out/test/result.json")));
  const auto child_result = nlohmann::json::parse(test::slurp(dir.path("out/child/result.json")));
  EXPECT_EQ(parent_result["scenario"], "test") << "the child must not overwrite its parent's result";
  EXPECT_EQ(parent_result["parallelism"]["micro_batch_size"], 4);
  EXPECT_EQ(child_result["parallelism"]["micro_batch_size"], 2);
  EXPECT_EQ(child_result["scenario"], "child");
  EXPECT_TRUE(std::filesystem::exists(dir.path("out/mine/result.json"))) << "a name the variant sets is kept";
}

TEST(NcclTests, TheTableReadsAsNcclTestsOutput) {
  test::TempDir dir;
  const auto r = run_dtsim({"collective", "--format", "nccl-tests", "-b", "8", "-e", "1M", "-f", "4", "--analytical"}, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream in(r.out);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  // nccl-tests' column header (src/common.cu, Reporter), byte for byte, as in its README's sample.
  const std::string names = "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong";
  const auto header = std::find(lines.begin(), lines.end(), names);
  ASSERT_NE(header, lines.end()) << r.out;
  EXPECT_EQ(*(header - 1), "#                                                              out-of-place                       in-place          ");
  EXPECT_EQ(*(header + 1), "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       ");
  EXPECT_EQ(lines.front().rfind("# nThread 1 nGpus 8 minBytes 8 maxBytes 1048576 step: 4(factor)", 0), 0u) << lines.front();
  // Rows: 13 columns, right-aligned under the header, as scripts for nccl-tests split them.
  std::vector<double> busbw;
  double size = 8;
  auto row = header + 2;
  for (; row != lines.end() && row->front() != '#'; ++row, size *= 4) {
    const auto f = fields(*row);
    ASSERT_EQ(f.size(), 13u) << *row;
    EXPECT_EQ(std::stod(f[0]), size);
    EXPECT_EQ(std::stol(f[1]), static_cast<long>(size / 4));
    EXPECT_EQ(f[2], "float");
    EXPECT_EQ(f[3], "sum");
    EXPECT_EQ(f[4], "-1");
    EXPECT_EQ(f[8], "0");
    EXPECT_EQ(f[12], "0");
    EXPECT_EQ(f[5], f[9]);
    EXPECT_EQ(row->find(f[0]) + f[0].size(), 12u) << "size ends where the header's does";
    busbw.push_back(std::stod(f[7]));
    busbw.push_back(std::stod(f[11]));
  }
  EXPECT_EQ(busbw.size(), 2u * 9);  // 8 B to 512 KiB by 4: the next, 2 MiB, is past -e
  ASSERT_NE(row, lines.end());
  EXPECT_EQ(*row, "# Out of bounds values : 0 OK");
  std::smatch m;
  ASSERT_TRUE(std::regex_match(*(row + 1), m, std::regex(R"(# Avg bus bandwidth    : ([0-9.e+-]+) )"))) << *(row + 1);
  double mean = 0;
  for (double b : busbw) mean += b / busbw.size();
  EXPECT_NEAR(std::stod(m[1]), mean, 0.01);
  EXPECT_EQ(*(row + 2), "#");
}

TEST(NcclTests, GatherLikeOperationsCountPerRankAndReduceNothing) {
  test::TempDir dir;
  const auto r = run_dtsim({"collective", "--op", "all_gather", "--format", "nccl-tests", "-b", "1M", "-e", "1M", "--analytical"}, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto at = r.out.find("\n     1048576");
  ASSERT_NE(at, std::string::npos) << r.out;
  const auto f = fields(r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1));
  ASSERT_EQ(f.size(), 13u);
  EXPECT_EQ(f[1], "32768");  // 1 MiB of floats over 8 ranks, as all_gather_perf counts
  EXPECT_EQ(f[3], "none");
  EXPECT_EQ(f[4], "-1");
}

namespace {

// docs/ci.md's command block, the one after <!-- ci-recipe -->.
std::vector<std::string> recipe_lines() {
  const std::string doc = test::slurp(test::source_dir() + "/docs/ci.md");
  const std::string open = "<!-- ci-recipe -->\n```sh\n";
  const auto begin = doc.find(open);
  if (begin == std::string::npos) return {};
  const auto end = doc.find("```", begin + open.size());
  std::istringstream in(doc.substr(begin + open.size(), end - begin - open.size()));
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

// The recipe run by sh -e as a CI job runs it, in a fresh folder, with the variables it reads.
int run_recipe(const test::TempDir& dir, const std::string& baseline, const std::string& candidate) {
  std::string script;
  for (const auto& l : recipe_lines()) script += l + "\n";
  dir.file("recipe.sh", script);
  const char* other = std::getenv("DTSIM_TEST_BINARY");  // an older build, to see this test fail on it
  const std::string cmd = "cd '" + dir.path() + "' && DTSIM='" + std::string(other ? other : DTSIM_BINARY) + "' BASELINE='" + baseline +
                          "' CANDIDATE='" + candidate + "' sh -e recipe.sh 2> recipe.err";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

long count_of(const std::string& text, const std::string& word) {
  long n = 0;
  for (auto at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++n;
  return n;
}

}  // namespace

TEST(CiRecipe, TheDocsCommandsRunAsWritten) {
  ASSERT_GE(recipe_lines().size(), 5u) << "docs/ci.md lost its <!-- ci-recipe --> block";
  const std::string scenarios = test::source_dir() + "/scenarios/";
  {
    test::TempDir dir;  // no change: exit 0, every testcase passes
    EXPECT_EQ(run_recipe(dir, scenarios + "gpt2-dp8-a100.json", scenarios + "gpt2-dp8-a100.json"), 0)
        << test::slurp(dir.path("recipe.err"));
    const std::string xml = test::slurp(dir.path("ci-out/dtsim-compare.xml"));
    EXPECT_EQ(count_of(xml, "<testcase "), 5) << xml;  // four metrics and memory.fits
    EXPECT_EQ(count_of(xml, "<failure "), 0) << xml;
  }
  {
    test::TempDir dir;  // GPUs on PCIe instead of NVSwitch: a slower step fails the job
    EXPECT_EQ(run_recipe(dir, scenarios + "gpt2-dp8-a100.json", scenarios + "topologies/gpt2-dp8-pcie.json"), 3)
        << test::slurp(dir.path("recipe.err"));
    const std::string xml = test::slurp(dir.path("ci-out/dtsim-compare.xml"));
    EXPECT_GE(count_of(xml, "<failure "), 1) << xml;
    EXPECT_NE(xml.find("name=\"step_time_s\">\n      <failure"), std::string::npos) << xml;
  }
}

TEST(CiRecipe, TheWorkflowsCarryTheSameCommands) {
  const std::string doc = test::slurp(test::source_dir() + "/docs/ci.md");
  for (const auto& l : recipe_lines()) {
    EXPECT_NE(doc.find("\n          " + l + "\n"), std::string::npos) << "GitHub Actions step lacks: " << l;
    std::string quoted;
    for (char c : l) quoted += c == '"' ? std::string("\\\"") : std::string(1, c);
    const bool plain = doc.find("\n    - " + l + "\n") != std::string::npos;
    const bool in_quotes = doc.find("\n    - \"" + quoted + "\"\n") != std::string::npos;
    EXPECT_TRUE(plain || in_quotes) << "GitLab job lacks: " << l;
  }
}
