// Ranges instead of points (sim/results/ranges.hpp): quantiles of the slowest of N GPUs in closed
// form, a validation group's residuals mixed in, and the chance of meeting a deadline.
#include <gtest/gtest.h>

#include <cmath>

#include "sim/results/ranges.hpp"

using namespace dtsim::results;

namespace {
double phi(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }
}  // namespace

TEST(Ranges, OneGpuWithoutResidualsIsTheNormalQuantile) {
  // Phi^-1(0.9) = 1.2815515655: P90 = point x (1 + 1.2816 sigma); P50 is the point.
  EXPECT_NEAR(step_quantile(2.0, {}, 0.02, 1, 0.5), 2.0, 1e-9);
  EXPECT_NEAR(step_quantile(2.0, {}, 0.02, 1, 0.9), 2.0 * (1 + 0.02 * 1.2815515655), 1e-8);
  EXPECT_NEAR(step_quantile(2.0, {}, 0.02, 1, 0.1), 2.0 * (1 - 0.02 * 1.2815515655), 1e-8);
}

TEST(Ranges, TheSlowestOfManyGpusGatesTheStep) {
  // P(max of n <= x) = Phi(z)^n: the median of the slowest of 1,024 sits where Phi(z) = 0.5^(1/1024).
  const double q = step_quantile(1.0, {}, 0.02, 1024, 0.5);
  EXPECT_NEAR(std::pow(phi((q - 1.0) / 0.02), 1024), 0.5, 1e-9);
  EXPECT_GT(q, 1.0 + 3.0 * 0.02);  // z of about 3.2: a 1,024-GPU step is ~6 % slower than a typical GPU
  EXPECT_LT(step_quantile(1.0, {}, 0.02, 8, 0.5), q);
}

TEST(Ranges, WithResidualsTheDeviceSpreadWidensWithoutShifting) {
  // The runs behind the residuals already waited for their slowest GPUs: one residual of 1.0
  // leaves the median at the point, however many GPUs.
  EXPECT_NEAR(step_quantile(5.0, {1.0}, 0.02, 4096, 0.5), 5.0, 1e-9);
  EXPECT_LT(step_quantile(5.0, {1.0}, 0.02, 4096, 0.1), 5.0);
  EXPECT_GT(step_quantile(5.0, {1.0}, 0.02, 4096, 0.9), 5.0);
}

TEST(Ranges, ResidualsShiftAndWidenTheRange) {
  // Two equally likely model errors, measured 0.9x and 1.1x the prediction, no device spread to
  // speak of: P10 and P90 sit on them, and half the mass lies below any time between.
  const std::vector<double> r{0.9, 1.1};
  EXPECT_NEAR(step_quantile(10.0, r, 1e-6, 1, 0.1), 9.0, 1e-3);
  EXPECT_NEAR(step_quantile(10.0, r, 1e-6, 1, 0.9), 11.0, 1e-3);
  EXPECT_NEAR(step_probability(10.0, r, 1e-6, 1, 10.0), 0.5, 1e-9);
}

TEST(Ranges, ResidualGroupsMatchStackFrameworkAndModelKind) {
  Spread s;
  s.groups.push_back({"megatron", {"default"}, {"megatron-lm"}, {"transformer"}, {1.05}});
  s.groups.push_back({"eager", {"pytorch-eager"}, {}, {}, {1.3}});
  EXPECT_EQ(residual_group(s, "default", "megatron-lm", "transformer")->group, "megatron");
  EXPECT_EQ(residual_group(s, "default", "deepspeed", "transformer"), nullptr);
  EXPECT_EQ(residual_group(s, "default", "megatron-lm", "cnn"), nullptr);
  EXPECT_EQ(residual_group(s, "pytorch-eager", "fsdp", "cnn")->group, "eager");
}

TEST(Ranges, ShippedSpreadIsCitedAndHasTheSuitesGroups) {
  const Spread& s = shipped_spread();
  EXPECT_NEAR(s.device_sigma, 0.05 / 2.847, 1e-5);  // clk-017: 5 % MAMF spread within an 8-GPU node
  EXPECT_NE(s.device_source.find("clk-017"), std::string::npos);
  ASSERT_NE(residual_group(s, "default", "megatron-lm", "transformer"), nullptr);
  EXPECT_EQ(residual_group(s, "default", "megatron-lm", "transformer")->ratios.size(), 10u);
  ASSERT_NE(residual_group(s, "torchtitan-compile", "fsdp", "transformer"), nullptr);
}

#include <nlohmann/json.hpp>

#include "helpers.hpp"
#include "run_dtsim.hpp"

TEST(Ranges, RunGivesTheRangeAndTheChanceOfADeadlineAndBudget) {
  dtsim::test::TempDir dir;
  const std::string base = dtsim::test::source_dir() + "/scenarios/planning/llama-3-70b-15t-2048-h100.json";
  const std::string file = dir.file("s.json", "{\"extends\": \"" + base +
                                                  "\", \"name\": \"deadline\", \"training\": {\"deadline_days\": 97, \"budget_usd\": 12e6}}");
  const auto r = dtsim::test::run_dtsim({"run", file, "--format", "json", "-o", dir.path("out")}, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto& range = j.at("range");
  const auto& days = range.at("time_to_train_days");
  EXPECT_LT(days.at("p10").get<double>(), days.at("p50").get<double>());
  EXPECT_LT(days.at("p50").get<double>(), days.at("p90").get<double>());
  // 97 days lies between P10 and P90: the chance is strictly between 10 % and 90 %, and on the
  // side of one half that 97 lies of P50.
  const double p = range.at("deadline_probability").get<double>();
  EXPECT_GT(p, 0.1);
  EXPECT_LT(p, 0.9);
  EXPECT_EQ(p < 0.5, 97.0 < days.at("p50").get<double>());
  EXPECT_GT(range.at("budget_probability").get<double>(), 0.0);
  EXPECT_EQ(range.at("sources").at("validation_group"), "megatron-sc21");
  // A deadline needs the run's length.
  const std::string bad = dir.file("b.json", "{\"extends\": \"" + dtsim::test::source_dir() +
                                                 "/scenarios/default.json\", \"training\": {\"deadline_days\": 3}}");
  const auto e = dtsim::test::run_dtsim({"run", bad, "-o", dir.path("b")}, dir);
  EXPECT_EQ(e.code, 2);
  EXPECT_NE(e.err.find("/training/deadline_days"), std::string::npos) << e.err;
}
