// `dtsim sweep` over several clusters (issue 16, item 2): GPU-count and device lists, ranking by
// time, cost or throughput per GPU, csv, duplicates dropped, and --write-best's runnable winner.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "run_dtsim.hpp"

namespace {

namespace fs = std::filesystem;

std::string scenario(const std::string& name) { return dtsim::test::source_dir() + "/scenarios/" + name; }

using dtsim::test::Outcome;
using dtsim::test::run_dtsim;
using dtsim::test::slurp;

nlohmann::json sweep_json(std::vector<std::string> extra, const dtsim::test::TempDir& dir, int expect = 0) {
  std::vector<std::string> args{"sweep", scenario("gpt2-dp8-a100.json"), "--format", "json", "--top", "100000"};
  args.insert(args.end(), extra.begin(), extra.end());
  auto r = run_dtsim(args, dir);
  EXPECT_EQ(r.code, expect) << r.err;
  return nlohmann::json::parse(r.out);
}

// RFC 4180 records: fields split on commas outside quotes, "" inside quotes is one quote.
std::vector<std::vector<std::string>> parse_csv(const std::string& text, bool& well_formed) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false;
  well_formed = true;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') field += '"', ++i;
      else if (c == '"') quoted = false;
      else field += c;
    } else if (c == '"') {
      if (!field.empty()) well_formed = false;
      quoted = true;
    } else if (c == ',') {
      row.push_back(field), field.clear();
    } else if (c == '\r') {
      if (i + 1 >= text.size() || text[i + 1] != '\n') well_formed = false;
    } else if (c == '\n') {
      if (i == 0 || text[i - 1] != '\r') well_formed = false;  // records end in CRLF
      row.push_back(field), field.clear();
      rows.push_back(row), row.clear();
    } else {
      field += c;
    }
  }
  if (quoted || !field.empty() || !row.empty()) well_formed = false;  // the last record ends in CRLF too
  return rows;
}

}  // namespace

TEST(SweepClusters, GpuAndDeviceListsEnumerateEveryClusterAndBadListsNameTheFlag) {
  dtsim::test::TempDir dir;
  auto j = sweep_json({"--gpus", "8,16", "--devices", "a100-sxm-80gb,h100-sxm-80gb"}, dir);
  ASSERT_EQ(j["clusters"].size(), 4u) << j.dump();
  std::set<std::pair<int, std::string>> seen;
  for (const auto& row : j["rows"]) {
    const int g = row["gpus"].get<int>();
    EXPECT_EQ(row["tensor"].get<int>() * row["pipeline"].get<int>() * row["data"].get<int>(), g);
    seen.insert({g, row["device"].get<std::string>()});
  }
  EXPECT_EQ(seen, (std::set<std::pair<int, std::string>>{{8, "a100-sxm-80gb"}, {8, "h100-sxm-80gb"},
                                                          {16, "a100-sxm-80gb"}, {16, "h100-sxm-80gb"}}));
  // A single value works as before.
  auto one = sweep_json({"--gpus", "16"}, dir);
  EXPECT_EQ(one["gpus"].get<int>(), 16);
  ASSERT_EQ(one["clusters"].size(), 1u);
  EXPECT_EQ(one["clusters"][0]["device"], "a100-sxm-80gb");  // the scenario's device

  for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
           {"--gpus", "8,,16"}, {"--gpus", "8,x"}, {"--gpus", "0"}, {"--gpus", "8,"}, {"--gpus", "-8"}, {"--gpus", "12"}}) {
    std::vector<std::string> args{"sweep", scenario("gpt2-dp8-a100.json")};
    args.insert(args.end(), bad.begin(), bad.end());
    auto r = run_dtsim(args, dir);
    EXPECT_EQ(r.code, 2) << bad[1];
    EXPECT_NE(r.err.find("--gpus"), std::string::npos) << bad[1] << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << bad[1];
  }
  auto r = run_dtsim({"sweep", scenario("gpt2-dp8-a100.json"), "--devices", "a100-sxm-80gb,no-such-gpu"}, dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("error: --devices: unknown device \"no-such-gpu\""), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
}

TEST(SweepClusters, TwoDevicesRankedByCostFollowTheirPrices) {
  dtsim::test::TempDir dir;
  // Without a training length: cost per million tokens, at each profile's price (A100 $1.89, H100 $2.49).
  auto j = sweep_json({"--devices", "a100-sxm-80gb,h100-sxm-80gb", "--rank-by", "cost"}, dir);
  EXPECT_NE(j["ranked_by"].get<std::string>().find("no training length"), std::string::npos);
  double prev = 0;
  std::set<std::string> devices;
  for (const auto& row : j["rows"]) {
    if (!row["fits"].get<bool>()) continue;
    const double cost = row["cost_per_million_tokens_usd"].get<double>();
    EXPECT_GE(cost, prev * (1 - 1e-12));
    prev = cost;
    devices.insert(row["device"].get<std::string>());
    EXPECT_DOUBLE_EQ(row["price_per_gpu_hour_usd"].get<double>(), row["device"] == "a100-sxm-80gb" ? 1.89 : 2.49);
  }
  EXPECT_EQ(devices.size(), 2u);
  // With one, the cost to train: a run given in tokens ranks by its total, and by time when asked.
  const auto f = dir.file("len.json", R"({"extends": ")" + scenario("gpt2-dp8-a100.json") +
                                          R"(", "training": {"tokens": 1e10}})");
  for (const std::string& by : std::vector<std::string>{"cost", "time"}) {
    auto r = run_dtsim({"sweep", f, "--devices", "a100-sxm-80gb,h100-sxm-80gb", "--rank-by", by, "--format", "json", "--top", "100000"}, dir);
    ASSERT_EQ(r.code, 0) << r.err;
    auto k = nlohmann::json::parse(r.out);
    const std::string field = by == "cost" ? "cost_usd" : "time_to_train_s";
    prev = 0;
    for (const auto& row : k["rows"]) {
      if (!row["fits"].get<bool>()) continue;
      ASSERT_TRUE(row.contains(field)) << row.dump();
      EXPECT_GE(row[field].get<double>(), prev * (1 - 1e-12)) << by;
      prev = row[field].get<double>();
    }
    EXPECT_GT(prev, 0);
  }
}

TEST(SweepClusters, CsvHasOneHeaderAndOneWellFormedRowPerCandidate) {
  dtsim::test::TempDir dir;
  auto r = run_dtsim({"sweep", scenario("gpt2-dp8-a100.json"), "--gpus", "8,16", "--format", "csv"}, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  bool ok = false;
  auto rows = parse_csv(r.out, ok);
  EXPECT_TRUE(ok) << r.out.substr(0, 400);
  ASSERT_GT(rows.size(), 2u);
  const auto& header = rows[0];
  EXPECT_EQ(header[0], "rank");
  EXPECT_NE(std::find(header.begin(), header.end(), "step_time_s"), header.end());
  for (std::size_t i = 1; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].size(), header.size()) << i;
    EXPECT_EQ(rows[i][0], std::to_string(i));
  }
  auto j = sweep_json({"--gpus", "8,16"}, dir);
  EXPECT_EQ(rows.size() - 1, j["evaluated"].get<std::size_t>());
}

TEST(SweepClusters, DuplicateClustersAndStrategiesAreDropped) {
  dtsim::test::TempDir dir;
  auto once = sweep_json({"--gpus", "8"}, dir);
  auto twice = sweep_json({"--gpus", "8,8,08", "--devices", "a100-sxm-80gb,a100-sxm-80gb"}, dir);
  EXPECT_EQ(twice["clusters"].size(), 1u);
  EXPECT_EQ(twice["candidates"], once["candidates"]);
  std::set<std::string> keys;
  for (const auto& row : twice["rows"])
    EXPECT_TRUE(keys.insert(std::to_string(row["gpus"].get<int>()) + row["device"].get<std::string>() +
                            row["strategy"].get<std::string>()).second)
        << row.dump();
}

TEST(SweepClusters, WriteBestIsARunnableScenarioWithTheSameStepTime) {
  dtsim::test::TempDir dir;
  const std::string best = dir.path("best.json");
  auto j = sweep_json({"--gpus", "16", "--devices", "h100-sxm-80gb", "--write-best", best}, dir);
  ASSERT_TRUE(fs::is_regular_file(best));
  const auto& top = j["rows"][0];
  auto written = nlohmann::json::parse(slurp(best));
  EXPECT_FALSE(written.contains("extends"));
  EXPECT_EQ(written["hardware"]["device"], "h100-sxm-80gb");
  EXPECT_EQ(written["parallelism"]["tensor"], top["tensor"]);
  EXPECT_EQ(written["parallelism"]["pipeline"], top["pipeline"]);
  EXPECT_EQ(written["parallelism"]["data"], top["data"]);
  // The sweep prices with the analytical replay: run the winner the same way, from another folder.
  const auto f = dir.file("elsewhere/check.json", R"({"extends": ")" + best + R"(", "simulation": {"backend": "analytical"}})");
  // best.json is above elsewhere/: followed only with --allow-outside (issue 25).
  auto r = run_dtsim({"run", f, "--allow-outside", "--format", "json", "-o", dir.path("o")}, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  auto run = nlohmann::json::parse(r.out);
  EXPECT_NEAR(run["step_time_s"].get<double>(), top["step_time_s"].get<double>(), 1e-12 * top["step_time_s"].get<double>());

  // Nothing but a regular file is replaced, and a refused target costs no work.
  fs::create_directories(dir.path("adir"));
  fs::create_symlink(dir.path("target.json"), dir.path("link.json"));
  for (const std::string& bad : std::vector<std::string>{"adir", "link.json"}) {
    auto b = run_dtsim({"sweep", scenario("gpt2-dp8-a100.json"), "--write-best", dir.path(bad)}, dir);
    EXPECT_EQ(b.code, 2) << bad;
    EXPECT_TRUE(b.out.empty()) << bad;
  }
  EXPECT_FALSE(fs::exists(dir.path("target.json")));
}

TEST(SweepClusters, ProgressGoesToStderrOnlyWhenAsked) {
  dtsim::test::TempDir dir;
  auto quiet = run_dtsim({"sweep", scenario("gpt2-dp8-a100.json"), "--format", "json"}, dir);
  ASSERT_EQ(quiet.code, 0);
  EXPECT_TRUE(quiet.err.empty()) << quiet.err;  // stderr is a file here, not a terminal
  auto loud = run_dtsim({"sweep", scenario("gpt2-dp8-a100.json"), "--format", "json", "--progress"}, dir);
  ASSERT_EQ(loud.code, 0);
  EXPECT_EQ(nlohmann::json::parse(loud.out), nlohmann::json::parse(quiet.out));  // stdout unchanged
  const auto n = nlohmann::json::parse(loud.out)["candidates"].get<int>();
  EXPECT_NE(loud.err.find(std::to_string(n) + "/" + std::to_string(n) + " candidates"), std::string::npos) << loud.err;
  EXPECT_NE(loud.err.find("ETA"), std::string::npos) << loud.err;
}
