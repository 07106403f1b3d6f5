// Issue 31, the CI engineer: per-metric tolerances and machine-readable verdicts from `compare`,
// `run --require-fit`, variants with their own output folders, nccl-tests' table layout.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "run_dtsim.hpp"

using namespace dtsim;
using test::run_dtsim;

namespace {

// Step 1 % slower, memory 3 % larger: within each metric's default tolerance (2 %, 5 %).
struct Pair {
  test::TempDir dir;
  std::string a = dir.file("a.json", R"({"step_time_s": 1.0, "memory": {"peak_bytes": 100, "fits": true}})");
  std::string b = dir.file("b.json", R"({"step_time_s": 1.01, "memory": {"peak_bytes": 103, "fits": true}})");
};

}  // namespace

TEST(CompareMetrics, EachMetricHasItsOwnTolerance) {
  Pair p;
  EXPECT_EQ(run_dtsim({"compare", p.a, p.b}, p.dir).code, 0) << "3 % more memory is within memory's 5 % default";
  EXPECT_EQ(run_dtsim({"compare", p.a, p.b, "--metric", "memory.peak_bytes=0.02"}, p.dir).code, 3);
  EXPECT_EQ(run_dtsim({"compare", p.a, p.b, "--metric", "step_time_s=0.005"}, p.dir).code, 3);
  EXPECT_EQ(run_dtsim({"compare", p.a, p.b, "--metric", "/step_time_s=0.005"}, p.dir).code, 3) << "a JSON pointer names it too";
  // --rel-tol stays the tolerance of every metric not named.
  EXPECT_EQ(run_dtsim({"compare", p.a, p.b, "--rel-tol", "0.02"}, p.dir).code, 3);
  EXPECT_EQ(run_dtsim({"compare", p.a, p.b, "--rel-tol", "0.02", "--metric", "memory.peak_bytes=0.05"}, p.dir).code, 0);
  // A metric named that the results lack is not checked, and the warning says so.
  const auto absent = run_dtsim({"compare", p.a, p.b, "--metric", "flops.hfu=0.01"}, p.dir);
  EXPECT_EQ(absent.code, 0);
  EXPECT_NE(absent.err.find("warning: --metric /flops/hfu: not in both results, not compared"), std::string::npos) << absent.err;
  const auto r = run_dtsim({"compare", p.a, p.b, "--metric", "memory.peak_bytes=0.02"}, p.dir);
  EXPECT_NE(r.out.find("/memory/peak_bytes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(tol 2%)  REGRESSION"), std::string::npos) << r.out;
}

TEST(CompareMetrics, UnknownMetricOrToleranceExitsTwo) {
  Pair p;
  auto r = run_dtsim({"compare", p.a, p.b, "--metric", "step_time=0.02"}, p.dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--metric: unknown metric \"step_time\" (did you mean \"step_time_s\"?)"), std::string::npos) << r.err;
  r = run_dtsim({"compare", p.a, p.b, "--metric", "memory.peak_byte=0.05"}, p.dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("did you mean \"memory.peak_bytes\""), std::string::npos) << r.err;
  for (const char* bad : {"step_time_s", "step_time_s=", "step_time_s=two", "step_time_s=-0.1", "step_time_s=nan", "memory.fits=0.1"}) {
    r = run_dtsim({"compare", p.a, p.b, "--metric", bad}, p.dir);
    EXPECT_EQ(r.code, 2) << bad;
    EXPECT_NE(r.err.find("--metric"), std::string::npos) << bad << r.err;
  }
}

TEST(CompareFormats, JsonCarriesEveryMetricAndTheVerdict) {
  Pair p;
  const auto r = run_dtsim({"compare", p.a, p.b, "--metric", "memory.peak_bytes=0.02", "--format", "json"}, p.dir);
  ASSERT_EQ(r.code, 3) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["regression"].get<bool>());
  ASSERT_EQ(j["metrics"].size(), 3u) << j.dump();  // step time, memory, fits
  EXPECT_EQ(j["metrics"][0]["metric"], "step_time_s");
  EXPECT_NEAR(j["metrics"][0]["change"].get<double>(), 0.01, 1e-12);
  EXPECT_EQ(j["metrics"][0]["tolerance"], 0.02);
  EXPECT_FALSE(j["metrics"][0]["regression"].get<bool>());
  EXPECT_EQ(j["metrics"][1]["metric"], "memory.peak_bytes");
  EXPECT_TRUE(j["metrics"][1]["regression"].get<bool>());
  EXPECT_EQ(j["metrics"][2]["metric"], "memory.fits");
  EXPECT_EQ(j["metrics"][2]["candidate"], true);
}

namespace {
// Well-formed XML as far as a JUnit reader needs: tags nest and close in order, every & starts
// an entity, no < or > inside text or attribute values. Returns the elements' names in order.
std::vector<std::string> xml_elements(const std::string& x) {
  std::vector<std::string> stack, seen;
  const std::regex entity("^&(lt|gt|amp|quot|apos);");
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (x[i] == '&') {
      EXPECT_TRUE(std::regex_search(x.substr(i, 8), entity)) << "bare & at " << i;
      continue;
    }
    if (x[i] == '>') ADD_FAILURE() << "bare > at " << i;
    if (x[i] != '<') continue;
    const std::size_t end = x.find('>', i);
    if (end == std::string::npos) return ADD_FAILURE() << "unclosed tag", seen;
    std::string tag = x.substr(i + 1, end - i - 1);
    EXPECT_EQ(tag.find('<'), std::string::npos) << tag;
    i = end;
    if (tag.front() == '?') continue;
    if (tag.front() == '/') {
      EXPECT_FALSE(stack.empty());
      if (!stack.empty()) {
        EXPECT_EQ(stack.back(), tag.substr(1));
      }
      if (!stack.empty()) stack.pop_back();
      continue;
    }
    const std::string name = tag.substr(0, tag.find_first_of(" /"));
    seen.push_back(name);
    if (tag.back() != '/') stack.push_back(name);
  }
  EXPECT_TRUE(stack.empty());
  return seen;
}
}  // namespace

TEST(CompareFormats, JunitHasATestcasePerMetricAndAFailurePerRegression) {
  test::TempDir dir;
  // A file name that XML must escape.
  const std::string a = dir.file("base<&\"'>.json", R"({"step_time_s": 1.0, "memory": {"peak_bytes": 100, "fits": true}})");
  const std::string b = dir.file("cand.json", R"({"step_time_s": 1.5, "memory": {"peak_bytes": 100, "fits": false}})");
  const auto r = run_dtsim({"compare", a, b, "--format", "junit"}, dir);
  ASSERT_EQ(r.code, 3) << r.err;
  EXPECT_EQ(r.out.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", 0), 0u) << r.out;
  const auto names = xml_elements(r.out);
  EXPECT_EQ(std::count(names.begin(), names.end(), "testcase"), 3) << r.out;
  EXPECT_EQ(std::count(names.begin(), names.end(), "failure"), 2) << r.out;  // step time, fits
  EXPECT_NE(r.out.find("tests=\"3\" failures=\"2\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("base&lt;&amp;&quot;&apos;&gt;.json"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("<testcase classname=\"dtsim.compare\" name=\"step_time_s\">"), std::string::npos) << r.out;
  // No regression: testcases without failures, exit 0.
  const auto ok = run_dtsim({"compare", b, b, "--format", "junit"}, dir);
  EXPECT_EQ(ok.code, 0);
  const auto ok_names = xml_elements(ok.out);
  EXPECT_EQ(std::count(ok_names.begin(), ok_names.end(), "failure"), 0) << ok.out;
}
