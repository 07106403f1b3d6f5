// Issue 28 item 3, the planner's answer: `sweep --by-cluster` gives the best strategy of each
// cluster size and device with days, GPU-hours, energy and cost; --max-days, --max-cost and
// --min-headroom limit it; identically priced strategies are folded into one row naming them;
// money and times read as people write them; long names keep the table's columns; CSV and JSON
// carry the same rows.
#include <gtest/gtest.h>
#include <fmt/format.h>

#include <algorithm>

#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "run_dtsim.hpp"
#include "sim/config/scenario.hpp"
#include "sim/results/result.hpp"
#include "sim/sweep/candidates.hpp"
#include "sim/sweep/human.hpp"

namespace {

using dtsim::test::run_dtsim;
using dtsim::test::TempDir;
using Json = nlohmann::ordered_json;  // keys in the order the output gives them

std::string scenario(const std::string& name) { return dtsim::test::source_dir() + "/scenarios/" + name; }

// GPT-2 small on 10 B tokens with flash attention, where selective recomputation saves nothing.
std::string gpt2_10b(const TempDir& dir) {
  return dir.file("gpt2-10b.json", R"({"extends": ")" + scenario("gpt2-dp8-a100.json") +
                                       R"(", "name": "gpt2-10b", "training": {"tokens": 1e10, "attention": "flash"}})");
}

const std::vector<std::string> kClusters{"--gpus", "8,16", "--devices", "a100-sxm-80gb,h100-sxm-80gb"};

dtsim::test::Outcome sweep(const std::string& file, std::vector<std::string> extra, const TempDir& dir) {
  std::vector<std::string> args{"sweep", file};
  args.insert(args.end(), kClusters.begin(), kClusters.end());
  args.insert(args.end(), extra.begin(), extra.end());
  return run_dtsim(args, dir);
}

Json sweep_json(const std::string& file, std::vector<std::string> extra, const TempDir& dir, int expect = 0) {
  extra.insert(extra.end(), {"--format", "json"});
  const auto r = sweep(file, extra, dir);
  EXPECT_EQ(r.code, expect) << r.err;
  return Json::parse(r.out);
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

TEST(SweepPlan, ByClusterGivesEachClustersBestWithDaysGpuHoursEnergyAndCost) {
  TempDir dir;
  const auto j = sweep_json(gpt2_10b(dir), {"--by-cluster", "--per-cluster", "1000"}, dir);
  EXPECT_EQ(j["by_cluster"], true);
  std::vector<std::pair<int, std::string>> order;
  std::map<std::pair<int, std::string>, double> last_time;
  for (const auto& row : j["rows"]) {
    const std::pair<int, std::string> cluster{row["gpus"], row["device"]};
    if (row["rank"] == 1) order.push_back(cluster);
    ASSERT_FALSE(row["strategy"].is_null()) << row.dump();
    // Each cluster's rows best first: by the whole run's time, as ranked by default.
    const double t = row["time_to_train_s"];
    if (last_time.contains(cluster)) { EXPECT_LE(last_time[cluster], t) << row.dump(); }
    last_time[cluster] = t;
    EXPECT_EQ(row["tensor"].get<int>() * row["pipeline"].get<int>() * row["data"].get<int>(), cluster.first);
    EXPECT_DOUBLE_EQ(row["days"].get<double>(), t / 86400);
    EXPECT_NEAR(row["gpu_hours"].get<double>(), cluster.first * t / 3600, 1e-9 * cluster.first * t);
    EXPECT_NEAR(row["cost_usd"].get<double>(), row["gpu_hours"].get<double>() * row["price_per_gpu_hour_usd"].get<double>(),
                1e-9 * row["cost_usd"].get<double>());
    EXPECT_GT(row["energy_kwh"].get<double>(), 0);
    EXPECT_GT(row["headroom_bytes"].get<double>(), 0);
  }
  // Every cluster once, in the sweep's order; each one's best confirmed by the replay.
  EXPECT_EQ(order, (std::vector<std::pair<int, std::string>>{
                       {8, "a100-sxm-80gb"}, {8, "h100-sxm-80gb"}, {16, "a100-sxm-80gb"}, {16, "h100-sxm-80gb"}}));
  for (const auto& row : j["rows"])
    if (row["rank"] == 1) { EXPECT_EQ(row["priced_by"], "replay") << row.dump(); }
}

TEST(SweepPlan, LimitsKeepOnlyPlansWithinDaysCostAndHeadroom) {
  TempDir dir;
  const auto f = gpt2_10b(dir);
  const auto all = sweep_json(f, {"--by-cluster", "--per-cluster", "1000"}, dir);
  // A day limit between the clusters' best: the A100 clusters' plans mostly fail it.
  const auto days = sweep_json(f, {"--by-cluster", "--per-cluster", "1000", "--max-days", "0.05"}, dir);
  ASSERT_LT(days["rows"].size(), all["rows"].size());
  std::size_t without = 0;
  for (const auto& row : days["rows"]) {
    if (row["strategy"].is_null()) {
      ++without;
      EXPECT_NE(row["none_because"].get<std::string>().find("over 1.2 hours"), std::string::npos) << row.dump();
    } else {
      EXPECT_LE(row["days"].get<double>(), 0.05);
    }
  }
  EXPECT_EQ(days["limits"]["max_days"], 0.05);
  // A cost limit between the plans' cheapest and dearest.
  std::vector<double> costs;
  for (const auto& row : all["rows"])
    if (!row["strategy"].is_null()) costs.push_back(row["cost_usd"].get<double>());
  ASSERT_GT(costs.size(), 2u);
  std::sort(costs.begin(), costs.end());
  const double limit = costs[costs.size() / 2];
  const auto cost = sweep_json(f, {"--by-cluster", "--per-cluster", "1000", "--max-cost", fmt::format("{}", limit)}, dir);
  int kept = 0;
  for (const auto& row : cost["rows"])
    if (!row["strategy"].is_null()) {
      EXPECT_LE(row["cost_usd"].get<double>(), limit);
      ++kept;
    }
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, static_cast<int>(costs.size()));
  const auto room = sweep_json(f, {"--by-cluster", "--per-cluster", "1000", "--min-headroom", "73.5"}, dir);
  ASSERT_FALSE(room["rows"].empty());
  for (const auto& row : room["rows"])
    if (!row["strategy"].is_null()) { EXPECT_GE(row["headroom_bytes"].get<double>(), 73.5 * 1024 * 1024 * 1024); }
  EXPECT_LT(room["within_limits"].get<int>(), all["within_limits"].get<int>());

  // The plain ranking answers "the cheapest that finishes within N days" the same way.
  const auto cheapest = sweep_json(f, {"--rank-by", "cost", "--max-days", "0.02", "--top", "1000"}, dir);
  ASSERT_FALSE(cheapest["rows"].empty());
  for (const auto& row : cheapest["rows"]) EXPECT_LE(row["time_to_train_s"].get<double>(), 0.02 * 86400);
  for (std::size_t i = 1; i < cheapest["rows"].size(); ++i)
    EXPECT_LE(cheapest["rows"][i - 1]["cost_usd"].get<double>(), cheapest["rows"][i]["cost_usd"].get<double>());

  // Nothing within the limits: exit 3, saying so; a limit on days needs the run's length.
  const auto none = sweep(f, {"--max-days", "0.001"}, dir);
  EXPECT_EQ(none.code, 3);
  EXPECT_NE(none.out.find("no strategy is within the limits (at most 1 min)"), std::string::npos) << none.out;
  const auto no_length = sweep(scenario("gpt2-dp8-a100.json"), {"--max-days", "3"}, dir);
  EXPECT_EQ(no_length.code, 2);
  EXPECT_NE(no_length.err.find("--max-days: needs the run's length: set training.tokens or training.steps"), std::string::npos)
      << no_length.err;
}

TEST(SweepPlan, IdenticallyPricedStrategiesAreFoldedIntoOneRowNamingThem) {
  TempDir dir;
  const auto j = sweep_json(gpt2_10b(dir), {"--by-cluster", "--per-cluster", "3"}, dir);
  std::size_t folded = 0;
  std::map<std::pair<int, std::string>, std::vector<Json>> rows;
  for (const auto& row : j["rows"]) {
    rows[{row["gpus"], row["device"]}].push_back(row);
    for (const auto& name : row["folded"]) {
      ++folded;
      // Under flash attention selective recomputation stores and computes what none does.
      EXPECT_EQ(name.get<std::string>(), row["strategy"].get<std::string>() + " recompute=selective") << row.dump();
    }
  }
  EXPECT_GE(folded, 4u);
  // No two rows of a cluster are priced the same.
  for (const auto& [cluster, list] : rows)
    for (std::size_t a = 0; a < list.size(); ++a)
      for (std::size_t b = a + 1; b < list.size(); ++b)
        EXPECT_FALSE(list[a]["step_time_s"] == list[b]["step_time_s"] && list[a]["peak_bytes"] == list[b]["peak_bytes"]);
  const auto text = sweep(gpt2_10b(dir), {"--by-cluster"}, dir);
  EXPECT_NE(text.out.find("= tp1 pp1 dp8 mb8 zero1 recompute=selective\n"), std::string::npos) << text.out;
}

TEST(SweepPlan, MoneyTimesAndEnergyReadAsPeopleWriteThem) {
  using namespace dtsim::sweep;
  EXPECT_EQ(human_money(13308029), "$13.3 M");
  EXPECT_EQ(human_money(518268.96), "$518 k");
  EXPECT_EQ(human_money(999.7), "$1.00 k");
  EXPECT_EQ(human_money(26.1), "$26.1");
  EXPECT_EQ(human_days(41.2 * 86400), "41.2 days");
  EXPECT_EQ(human_days(1.7 * 3600), "1.7 hours");
  EXPECT_EQ(human_days(38 * 60), "38 min");
  EXPECT_EQ(human_days(8.6), "9 s");
  EXPECT_EQ(human_number(3.84e6), "3.84 M");
  EXPECT_EQ(human_energy(2.69e6), "2.69 GWh");
  EXPECT_EQ(human_energy(312e3), "312 MWh");
  EXPECT_EQ(human_energy(5.52), "5.52 kWh");

  TempDir dir;
  const auto large = dir.file("gpt3.json", R"({"extends": ")" + scenario("hybrid/gpt3-175b-1024-a100.json") +
                                               R"(", "training": {"tokens": 3e11}})");
  const auto r = run_dtsim({"sweep", large, "--by-cluster", "--confirm", "1"}, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto table = lines(r.out);
  const auto row = std::find_if(table.begin(), table.end(), [](const std::string& l) { return l.rfind("1024  ", 0) == 0; });
  ASSERT_NE(row, table.end()) << r.out;
  EXPECT_TRUE(std::regex_search(*row, std::regex(R"(  \d+\.\d days  )"))) << *row;
  EXPECT_TRUE(std::regex_search(*row, std::regex(R"(  \$\d[\d.]* [kM]  )"))) << *row;
  EXPECT_TRUE(std::regex_search(*row, std::regex(R"(  \d[\d.]* MWh  )"))) << *row;
  EXPECT_FALSE(std::regex_search(*row, std::regex(R"(\d{5,})"))) << "a bare number in " << *row;
}

TEST(SweepPlan, LongStrategyNamesKeepTheTablesColumns) {
  TempDir dir;
  // GPT-3 175B's best strategies are named in up to 66 characters.
  const auto f = dir.file("gpt3.json", R"({"extends": ")" + scenario("hybrid/gpt3-175b-1024-a100.json") +
                                           R"(", "training": {"tokens": 3e11}})");
  const auto r = run_dtsim({"sweep", f, "--by-cluster", "--per-cluster", "12", "--confirm", "1"}, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto table = lines(r.out);
  const auto header = std::find_if(table.begin(), table.end(), [](const std::string& l) { return l.rfind("gpus  ", 0) == 0; });
  ASSERT_NE(header, table.end()) << r.out;
  // Each column's right edge (numbers) or left edge (priced by) where the header puts it.
  const std::size_t step_end = header->find("step") + 4, cost_end = header->find("cost") + 4,
                    priced_at = header->find("priced by");
  std::size_t rows = 0, longest = 0;
  for (auto l = header + 1; l != table.end() && !l->empty(); ++l) {
    if (l->rfind("1024  ", 0) != 0) continue;  // a folded strategy under its row
    ++rows;
    ASSERT_GT(l->size(), priced_at) << *l;
    EXPECT_EQ(l->substr(step_end - 2, 2), " s") << *l;
    EXPECT_NE((*l)[cost_end - 1], ' ') << *l;
    EXPECT_EQ((*l)[cost_end], ' ') << *l;
    EXPECT_TRUE(l->substr(priced_at, 6) == "replay" || l->substr(priced_at, 11) == "closed-form") << *l;
    longest = std::max(longest, l->find("  ", header->find("strategy")) - header->find("strategy"));
  }
  EXPECT_EQ(rows, 12u) << r.out;
  EXPECT_GT(longest, 56u) << "the old table's strategy column was 56 wide: " << r.out;
}

// "a; b" in CSV is the JSON list [a, b]; numbers compare exactly.
bool same_value(const Json& j, const std::string& csv) {
  if (j.is_null()) return csv.empty();
  if (j.is_string()) return j.get<std::string>() == csv;
  if (j.is_boolean()) return csv == (j.get<bool>() ? "true" : "false");
  if (j.is_number()) return !csv.empty() && j.get<double>() == std::stod(csv);
  std::string joined;
  for (const auto& x : j) joined += (joined.empty() ? "" : "; ") + x.get<std::string>();
  return joined == csv;
}

TEST(SweepPlan, CsvAndJsonCarryTheSameRows) {
  TempDir dir;
  const auto f = gpt2_10b(dir);
  const std::vector<std::string> plan{"--by-cluster", "--per-cluster", "2", "--max-days", "0.05"};
  const auto j = sweep_json(f, plan, dir);
  auto args = plan;
  args.insert(args.end(), {"--format", "csv"});
  const auto csv = sweep(f, args, dir);
  ASSERT_EQ(csv.code, 0) << csv.err;
  std::vector<std::vector<std::string>> records;
  for (auto l : lines(csv.out)) {
    ASSERT_EQ(l.back(), '\r');
    l.pop_back();
    std::vector<std::string> fields;
    std::string field;
    bool quoted = false;
    for (char c : l) {
      if (c == '"') quoted = !quoted;
      else if (c == ',' && !quoted) fields.push_back(field), field.clear();
      else field += c;
    }
    fields.push_back(field);
    records.push_back(fields);
  }
  ASSERT_EQ(records.size(), j["rows"].size() + 1);
  for (std::size_t i = 0; i < j["rows"].size(); ++i) {
    const auto& row = j["rows"][i];
    ASSERT_EQ(records[i + 1].size(), row.size());
    std::size_t k = 0;
    for (const auto& [key, value] : row.items()) {
      EXPECT_EQ(records[0][k], key);
      EXPECT_TRUE(same_value(value, records[i + 1][k])) << key << ": " << value.dump() << " vs " << records[i + 1][k];
      ++k;
    }
  }
}

}  // namespace

// A priority-order scenario's candidates keep the order only where the loader would (plain data
// parallelism); the others are the FIFO strategies a user could write, optimizer step included.
TEST(SweepPlan, PriorityOrderStaysWithPlainDataParallelCandidates) {
  using namespace dtsim;
  auto s = config::load_scenario(std::string(DTSIM_SOURCE_DIR) + "/scenarios/priority/ddp-100g-priority.json");
  s.backend = config::Backend::Analytical;
  s.steps_simulated = 1;
  int kept = 0, zero3 = 0;
  for (const auto& c : sweep::enumerate(s, {s.training.precision})) {
    const bool plain = c.p.tensor == 1 && c.p.pipeline == 1 && c.p.zero_stage == 0 && c.p.data > 1;
    EXPECT_EQ(c.p.priority_buckets, plain) << sweep::describe(c);
    kept += c.p.priority_buckets ? 1 : 0;
    if (c.p.zero_stage != 3 || zero3++ > 0) continue;
    auto one = s;
    one.parallelism = c.p;
    const auto r = results::simulate(one, false);
    EXPECT_GT(r.breakdown.optimizer, 0.0) << sweep::describe(c);
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(zero3, 0);
}

TEST(SweepPlan, PriorityBucketCandidatesWithZero3DoNotCrash) {
  // ZeRO-3 candidates of a priority-order scenario have no gradient buckets to update one by one:
  // they take the usual optimizer step (this sweep used to end in a segmentation fault).
  TempDir dir;
  const auto r = run_dtsim({"sweep", std::string(DTSIM_SOURCE_DIR) + "/scenarios/priority/ddp-100g-priority.json", "--confirm", "1"}, dir);
  EXPECT_EQ(r.code, 0) << r.err;
}

// On a torus the planner tries tensor-parallel groups of whole dimensions (1, 12, 16 on two
// 12 x 16 x 16 pods), not powers of two within a host of four chips: PaLM 540B's 2,048 sequences
// on 6,144 chips need a tensor size with a factor 3 (within hosts no candidate at all), so only
// the 12-chip lines give plans, and the best is the paper's 12-way split.
TEST(SweepPlan, OnATorusTensorGroupsAreWholeDimensions) {
  using namespace dtsim;
  const auto s = config::load_scenario(std::string(DTSIM_SOURCE_DIR) + "/scenarios/systems/palm-540b-6144-tpu-v4.json");
  std::set<int> tensors;
  for (const auto& c : sweep::enumerate(s, {s.training.precision})) tensors.insert(c.p.tensor);
  EXPECT_EQ(tensors, (std::set<int>{12}));
  TempDir dir;
  const auto r = run_dtsim({"sweep", std::string(DTSIM_SOURCE_DIR) + "/scenarios/systems/palm-540b-6144-tpu-v4.json", "--confirm", "1",
                            "--format", "csv"},
                           dir);
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream rows(r.out);
  std::string header, best;
  std::getline(rows, header);
  std::getline(rows, best);
  EXPECT_NE(best.find(",12,1,512,"), std::string::npos) << best;  // tensor, pipeline, data
}

// A long-context MoE scenario's candidates take expert parallelism over the context and data
// ranks (each size dividing context x data), the scenario's recompute modules only where they
// recompute selectively; the best written as a scenario loads again whatever its recomputation.
TEST(SweepPlan, LongContextMoeCandidatesFoldExpertsOverContextRanks) {
  using namespace dtsim;
  const std::string path = std::string(DTSIM_SOURCE_DIR) + "/scenarios/moe/mixtral-8x7b-64-h100-cp4-ep8.json";
  const auto s = config::load_scenario(path);
  int both = 0;
  for (const auto& c : sweep::enumerate(s, {s.training.precision})) {
    EXPECT_EQ((c.p.context * c.p.data) % c.p.expert, 0) << sweep::describe(c);
    both += c.p.context > 1 && c.p.data % c.p.expert != 0;  // groups only context ranks complete
    const bool selective = c.p.recompute == strategies::Recompute::Selective;
    EXPECT_EQ(c.p.recompute_modules, selective ? s.parallelism.recompute_modules : 0) << sweep::describe(c);
  }
  EXPECT_GT(both, 0);
  TempDir dir;
  auto p = s.parallelism;
  p.recompute = strategies::Recompute::None;
  const auto best = sweep::best_scenario(path, sweep::Cluster{64, "h100-sxm-80gb", s}, p, s.training.precision);
  EXPECT_EQ(best.find("recompute_modules"), std::string::npos);
  EXPECT_NO_THROW(config::load_scenario(dir.file("best.json", best)));
}
