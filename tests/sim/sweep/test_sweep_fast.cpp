// Issue 18, item 2: `dtsim sweep` ranks in closed form and confirms the best with the replay.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "run_dtsim.hpp"

namespace {

std::string scenario(const std::string& name) { return dtsim::test::source_dir() + "/scenarios/" + name; }

nlohmann::json sweep(std::vector<std::string> extra, const dtsim::test::TempDir& dir, const std::string& file = "") {
  std::vector<std::string> args{"sweep", file.empty() ? scenario("gpt2-dp8-a100.json") : file, "--format", "json", "--top", "100000"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = dtsim::test::run_dtsim(args, dir);
  EXPECT_EQ(r.code, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

TEST(SweepClosedForm, BestRowsAreReplayedAndTheRestRankedInClosedForm) {
  dtsim::test::TempDir dir;
  const auto j = sweep({"--confirm", "3"}, dir);
  ASSERT_GT(j["rows"].size(), 10u);
  EXPECT_EQ(j["closed_form"].get<std::size_t>(), j["candidates"].get<std::size_t>());
  EXPECT_GE(j["confirmed"].get<std::size_t>(), 3u);
  std::size_t replayed = 0;
  for (std::size_t i = 0; i < j["rows"].size(); ++i) {
    const auto& row = j["rows"][i];
    if (i < 3) {
      EXPECT_EQ(row["priced_by"], "replay") << i;
      EXPECT_TRUE(row.contains("closed_form_step_time_s")) << i;
    }
    if (row["priced_by"] == "replay") ++replayed;
  }
  EXPECT_EQ(replayed, j["confirmed"].get<std::size_t>());
  EXPECT_EQ(j["replayed"].get<std::size_t>(), replayed);

  // --confirm 0 replays nothing; --exact replays everything, and both agree on the best.
  const auto none = sweep({"--confirm", "0"}, dir);
  for (const auto& row : none["rows"]) EXPECT_EQ(row["priced_by"], "closed-form");
  EXPECT_EQ(none["replayed"].get<std::size_t>(), 0u);
  const auto exact = sweep({"--exact"}, dir);
  for (const auto& row : exact["rows"]) EXPECT_EQ(row["priced_by"], "replay");
  EXPECT_EQ(exact["closed_form"].get<std::size_t>(), 0u);
  EXPECT_EQ(exact["rows"][0]["strategy"], j["rows"][0]["strategy"]);
  EXPECT_EQ(exact["rows"][0]["step_time_s"].get<double>(), j["rows"][0]["step_time_s"].get<double>());
}

// Strategies the closed form does not know (here: compressed gradients) are replayed, and the
// sweep says why.
TEST(SweepClosedForm, UnknownStrategiesFallBackToTheReplayAndSaySo) {
  dtsim::test::TempDir dir;
  const auto f = dir.file("int8.json", R"({"extends": ")" + scenario("gpt2-dp8-a100.json") +
                                           R"(", "parallelism": {"gradient_compression": "int8"}})");
  const auto j = sweep({}, dir, f);
  EXPECT_EQ(j["closed_form"].get<std::size_t>(), 0u);
  ASSERT_EQ(j["replayed_because"].size(), 1u);
  EXPECT_EQ(j["replayed_because"][0]["reason"], "gradient compression");
  EXPECT_EQ(j["replayed_because"][0]["count"].get<std::size_t>(), j["candidates"].get<std::size_t>());
  for (const auto& row : j["rows"]) EXPECT_EQ(row["priced_by"], "replay");
  const auto text = dtsim::test::run_dtsim({"sweep", f}, dir);
  EXPECT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("replayed: the closed form does not know gradient compression"), std::string::npos) << text.out;
}

}  // namespace
