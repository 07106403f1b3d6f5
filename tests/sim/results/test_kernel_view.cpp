// `run --kernels`: one GPU's kernel time by what each kernel is for, as the stack prices it.
#include <gtest/gtest.h>

#include <string>

#include "helpers.hpp"
#include "reports/reports.hpp"
#include "sim/config/scenario.hpp"
#include "sim/results/kernel_view.hpp"
#include "sim/results/result.hpp"

using namespace dtsim;

namespace {

results::Result row(const std::string& name) {
  test::TempDir dir;
  return results::simulate(config::load_scenario(dir.file(
      "s.json", R"({"extends": ")" + test::source_dir() + "/scenarios/validation/h200-pytorch/" + name +
                    R"(", "simulation": {"backend": "analytical"}})")));
}

const results::KernelGroup* group_of(const std::vector<results::KernelGroup>& groups, const std::string& name) {
  for (const auto& g : groups)
    if (g.name == name) return &g;
  return nullptr;
}
double seconds_of(const std::vector<results::KernelGroup>& groups, const std::string& name) {
  const auto* g = group_of(groups, name);
  return g ? g->seconds : -1;
}
double kernels_of(const std::vector<results::KernelGroup>& groups, const std::string& name) {
  const auto* g = group_of(groups, name);
  return g ? g->kernels : -1;
}

}  // namespace

// One GPU, no communication: its step is its kernels back to back, so the groups add up to the
// breakdown's compute and optimizer parts, and each group is what the breakdown hides inside them.
TEST(KernelView, OneGpusGroupsAddUpToItsComputeAndOptimizer) {
  const auto r = row("llama3-8b-tp8-slice-eager.json");
  const auto groups = results::kernel_view(r, 0);
  double total = 0;
  for (const auto& g : groups) {
    EXPECT_GT(g.kernels, 0) << g.name;
    EXPECT_GE(g.seconds, 0) << g.name;
    total += g.seconds;
  }
  EXPECT_NEAR(total, r.breakdown.compute + r.breakdown.optimizer, 1e-9 * r.step_time_s);
  EXPECT_NEAR(seconds_of(groups, "optimizer"), r.breakdown.optimizer, 1e-9 * r.step_time_s);
  // What a Llama step is made of: GEMMs first, then flash attention with its copies.
  ASSERT_GE(groups.size(), 5u);
  EXPECT_EQ(groups[0].name, "GEMMs");
  EXPECT_GT(seconds_of(groups, "GEMMs"), seconds_of(groups, "attention"));
  EXPECT_GT(seconds_of(groups, "attention"), 0.2 * total);
  EXPECT_GT(seconds_of(groups, "norms"), 0);
  EXPECT_LT(seconds_of(groups, "convolutions"), 0);  // no group without a kernel
  // 32 layers: a flash kernel each way per layer.
  EXPECT_EQ(kernels_of(groups, "attention"), 64);
}

TEST(KernelView, TheTableNamesTheGpuAndEachGroup) {
  const auto r = row("resnet50-eager.json");
  const std::string table = reports::kernel_table(r);
  EXPECT_NE(table.find("kernel time by role (GPU 0"), std::string::npos) << table;
  for (const char* name : {"convolutions", "norms", "optimizer", "total"}) EXPECT_NE(table.find(name), std::string::npos) << name;
  EXPECT_EQ(table.find("attention"), std::string::npos) << table;
}
