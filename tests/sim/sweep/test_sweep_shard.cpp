// Issue 28 item 4 on one machine: `sweep --shard K/N` prices a deterministic slice and writes a
// part; `dtsim merge` joins the parts into the whole sweep's output byte for byte, the replay's
// confirmations included, and refuses parts that are missing, repeated or of another sweep.
// (tests/system/slurm_sweep.sh runs the same as a Slurm job array.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "run_dtsim.hpp"

namespace {

using dtsim::test::run_dtsim;
using dtsim::test::slurp;
using dtsim::test::TempDir;

std::string scenario(const std::string& name) { return dtsim::test::source_dir() + "/scenarios/" + name; }

// The parts of `sweep` (scenario and flags) in `n` shards, as files of `dir`.
std::vector<std::string> shards(const std::vector<std::string>& sweep, int n, const TempDir& dir, const std::string& stem = "part") {
  std::vector<std::string> parts;
  for (int k = 1; k <= n; ++k) {
    std::vector<std::string> args{"sweep"};
    args.insert(args.end(), sweep.begin(), sweep.end());
    parts.push_back(dir.path(stem + std::to_string(k) + ".json"));
    args.insert(args.end(), {"--shard", std::to_string(k) + "/" + std::to_string(n), "-o", parts.back()});
    const auto r = run_dtsim(args, dir);
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "");  // the part goes to its file
  }
  return parts;
}

dtsim::test::Outcome merge(std::vector<std::string> parts, std::vector<std::string> extra, const TempDir& dir) {
  parts.insert(parts.begin(), "merge");
  parts.insert(parts.end(), extra.begin(), extra.end());
  return run_dtsim(parts, dir);
}

void expect_merge_is_the_whole_sweep(const std::vector<std::string>& sweep, int n, const TempDir& dir) {
  auto parts = shards(sweep, n, dir);
  std::reverse(parts.begin(), parts.end());  // in any order
  const std::string best = dir.path("best.json");  // one name: the text says where it wrote
  for (const std::string format : {"text", "csv", "json"}) {
    std::vector<std::string> args{"sweep"};
    args.insert(args.end(), sweep.begin(), sweep.end());
    args.insert(args.end(), {"--format", format, "--write-best", best});
    const auto whole = run_dtsim(args, dir);
    const std::string whole_best = slurp(best);
    std::filesystem::remove(best);
    const auto merged = merge(parts, {"--format", format, "--write-best", best}, dir);
    EXPECT_EQ(merged.code, whole.code) << merged.err;
    EXPECT_EQ(merged.out, whole.out) << format;
    EXPECT_FALSE(whole_best.empty());
    EXPECT_EQ(slurp(best), whole_best);
  }
}

TEST(SweepShard, MergedPartsAreTheWholeSweepByteForByte) {
  TempDir dir;
  expect_merge_is_the_whole_sweep({scenario("gpt2-dp8-a100.json"), "--gpus", "8,16", "--devices", "a100-sxm-80gb,h100-sxm-80gb",
                                   "--confirm", "7", "--rank-by", "cost"},
                                  4, dir);
}

// The planner's answer with limits, each cluster's best confirmed: the merge confirms per cluster too.
TEST(SweepShard, MergedPlannerAnswerIsTheWholeSweepsByteForByte) {
  TempDir dir;
  const auto f = dir.file("gpt2-10b.json", R"({"extends": ")" + scenario("gpt2-dp8-a100.json") +
                                               R"(", "training": {"tokens": 1e10}})");
  expect_merge_is_the_whole_sweep({f, "--gpus", "8,16", "--devices", "a100-sxm-80gb,h100-sxm-80gb", "--by-cluster",
                                   "--max-days", "0.05", "--min-headroom", "60"},
                                  3, dir);
}

TEST(SweepShard, ShardsAreADeterministicPartitionOfTheCandidates) {
  TempDir dir;
  const std::vector<std::string> sweep{scenario("gpt2-dp8-a100.json"), "--gpus", "8,16"};
  const auto parts = shards(sweep, 3, dir);
  const auto again = shards(sweep, 3, dir, "again");
  std::set<std::size_t> seen;
  std::size_t total = 0, confirmed = 0;
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(slurp(parts[k]), slurp(again[k])) << "shard " << k + 1 << " twice";
    const auto j = nlohmann::json::parse(slurp(parts[k]));
    total = j["candidates"];
    const auto size = j["rows"].size();
    EXPECT_NEAR(static_cast<double>(size), total / 3.0, 1.0);  // round robin: even shares
    for (const auto& row : j["rows"]) {
      EXPECT_TRUE(seen.insert(row[0].get<std::size_t>()).second);
      EXPECT_EQ(row[0].get<std::size_t>() % 3, static_cast<std::size_t>(k));
      if (!row[5].is_null()) ++confirmed;
    }
  }
  EXPECT_EQ(seen.size(), total);
  // Each shard confirmed its own best 5; the whole sweep needs only some of those.
  EXPECT_GE(confirmed, 15u);
  const auto whole = run_dtsim({"sweep", sweep[0], "--gpus", "8,16", "--format", "json"}, dir);
  EXPECT_LE(nlohmann::json::parse(whole.out)["confirmed"].get<std::size_t>(), confirmed);
}

TEST(SweepShard, MergeRefusesMissingRepeatedOrForeignParts) {
  TempDir dir;
  const auto base = dir.file("s.json", R"({"extends": ")" + scenario("gpt2-dp8-a100.json") + R"("})");
  const auto parts = shards({base, "--confirm", "2"}, 3, dir);
  const auto missing = merge({parts[0], parts[2]}, {}, dir);
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("shard 2/3 is missing"), std::string::npos) << missing.err;
  const auto twice = merge({parts[0], parts[1], parts[2], parts[1]}, {}, dir);
  EXPECT_EQ(twice.code, 2);
  EXPECT_NE(twice.err.find("shard 2/3 is also"), std::string::npos) << twice.err;
  const auto other = shards({base, "--confirm", "3"}, 3, dir, "other");
  const auto foreign = merge({parts[0], other[1], parts[2]}, {}, dir);
  EXPECT_EQ(foreign.code, 2);
  EXPECT_NE(foreign.err.find(other[1] + ":/options"), std::string::npos) << foreign.err;
  const auto junk = dir.file("junk.json", "{\"rows\": [");
  const auto bad = merge({junk}, {}, dir);
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("junk.json: not a sweep part"), std::string::npos) << bad.err;
  // A part cut short (its shard killed while writing would leave none: parts are written whole).
  auto text = slurp(parts[1]);
  text.erase(text.rfind(",\n  ["), std::string::npos);
  const auto cut = dir.file("cut.json", text + "\n ]\n}\n");
  const auto short_part = merge({parts[0], cut, parts[2]}, {}, dir);
  EXPECT_EQ(short_part.code, 2);
  EXPECT_NE(short_part.err.find("a part is cut short"), std::string::npos) << short_part.err;
  // A part priced by another build of dtsim.
  auto other_build = slurp(parts[1]);
  const auto at = other_build.find("\"dtsim_build\": \"") + 16;
  other_build[at] = other_build[at] == '0' ? '1' : '0';
  const auto rebuilt = merge({parts[0], dir.file("rebuilt.json", other_build), parts[2]}, {}, dir);
  EXPECT_EQ(rebuilt.code, 2);
  EXPECT_NE(rebuilt.err.find("rebuilt.json:/dtsim_build: made by another dtsim build"), std::string::npos) << rebuilt.err;
  // The scenario edited after the shards ran.
  std::ofstream(base) << R"({"extends": ")" + scenario("gpt2-dp8-a100.json") + R"(", "training": {"global_batch_size": 256}})";
  const auto changed = merge(parts, {}, dir);
  EXPECT_EQ(changed.code, 2);
  EXPECT_NE(changed.err.find("changed since the shards ran"), std::string::npos) << changed.err;
}

TEST(SweepShard, ABadShardIsAnInputErrorNamingTheFlag) {
  TempDir dir;
  for (const std::string bad : {"0/4", "5/4", "2", "a/b", "1/0"}) {
    const auto r = run_dtsim({"sweep", scenario("gpt2-dp8-a100.json"), "--shard", bad}, dir);
    EXPECT_EQ(r.code, 2) << bad;
    EXPECT_NE(r.err.find("--shard: \"" + bad + "\" is not K/N"), std::string::npos) << r.err;
  }
  // Output flags belong to merge.
  const auto r = run_dtsim({"sweep", scenario("gpt2-dp8-a100.json"), "--shard", "1/2", "--format", "csv"}, dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--format"), std::string::npos) << r.err;
}

}  // namespace
