// Issue 14: expert-parallel all-to-alls on SimGrid, with every flow of every group on the topology.
#include <gtest/gtest.h>

#include "sim/config/scenario.hpp"
#include "sim/results/result.hpp"
#include "helpers.hpp"

using namespace dtsim;

namespace {

config::Scenario scenario(const test::TempDir& dir, const std::string& backend, int expert) {
  const std::string json = R"({"name": "moe", "model": {"kind": "transformer", "num_layers": 2, "hidden_size": 1024,
      "num_heads": 8, "ffn_hidden_size": 2048, "seq_len": 1024, "vocab_size": 1000, "mlp": "swiglu",
      "tied_embeddings": false, "linear_bias": false, "dropout": false, "num_experts": 16, "experts_per_token": 2,
      "expert_ffn_hidden_size": 2048},
    "hardware": {"device": "h100-sxm-80gb"}, "cluster": {"preset": "dgx-h100", "nodes": 2},
    "parallelism": {"data": 16, "expert": )" + std::to_string(expert) + R"(, "expert_skew": 0.5},
    "training": {"global_batch_size": 32, "attention": "flash"}, "simulation": {"backend": ")" + backend + R"("}})";
  return config::load_scenario(dir.file(backend + std::to_string(expert) + ".json", json));
}

// The all-to-alls on SimGrid take about what the analytical model says (nothing else runs beside
// them there), and the skewed GPU shows as straggler wait. SimGrid runs once per process: one
// expert-parallel size per test.
void agrees(int ep) {
  test::TempDir dir;
  const auto a = results::simulate(scenario(dir, "analytical", ep));
  const auto g = results::simulate(scenario(dir, "simgrid", ep));
  EXPECT_EQ(g.timeline.backend, "simgrid");
  EXPECT_GT(g.all_to_all_s, 0.0);
  EXPECT_NEAR(g.all_to_all_s, a.all_to_all_s, 0.1 * a.all_to_all_s);
  EXPECT_NEAR(g.step_time_s, a.step_time_s, 0.1 * a.step_time_s);
  EXPECT_GT(g.breakdown.straggler_wait, 0.0);
  EXPECT_NEAR(g.breakdown.total(), g.step_time_s, 1e-6 * g.step_time_s);
}

}  // namespace

TEST(MoeReplay, SimGridAllToAllsInsideANodeAgreeWithAnalytical) { agrees(8); }
TEST(MoeReplay, SimGridAllToAllsAcrossNodesAgreeWithAnalytical) { agrees(16); }
