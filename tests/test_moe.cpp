// Issue 14: mixture-of-experts models, expert parallelism and its all-to-alls, load skew.
#include <gtest/gtest.h>

#include "models/model_graph.hpp"
#include "sim/config/scenario.hpp"
#include "helpers.hpp"

using namespace dtsim;

namespace {

models::ModelSpec preset(const std::string& name) { return config::load_model_preset(name); }

models::ModelGraph whole(const models::ModelSpec& m) {
  return m.build(models::BuildOptions{1, 2, models::Attention::Flash});
}

}  // namespace

// Published totals and active counts. Where a publisher gives its figure to two significant digits
// ("37B", "3.3B") the check allows that figure's own rounding when it is looser than 1 %.
TEST(MoeModels, TotalParametersMatchPublishedWithinOnePercent) {
  // Mistral AI, "Mixtral of experts" (2023): 46.7B total.
  EXPECT_NEAR(whole(preset("mixtral-8x7b")).params() / 46.7e9, 1.0, 0.01);
  // Qwen3-30B-A3B model card: 30.5B total.
  EXPECT_NEAR(whole(preset("qwen3-30b-a3b")).params() / 30.5e9, 1.0, 0.01);
  // DeepSeek-V3 technical report, Sec. 4.2: 671B total (without the multi-token-prediction module).
  EXPECT_NEAR(whole(preset("deepseek-v3")).params() / 671e9, 1.0, 0.01);
  // gpt-oss model card: 116.8B total.
  EXPECT_NEAR(whole(preset("gpt-oss-120b")).params() / 116.8e9, 1.0, 0.01);
}

TEST(MoeModels, ActiveParametersMatchPublished) {
  // Mistral AI: "only uses 12.9B parameters per token" (embeddings counted).
  EXPECT_NEAR(whole(preset("mixtral-8x7b")).active_params() / 12.9e9, 1.0, 0.01);
  // gpt-oss model card: 5.13B active, the unembedding counted and the input embedding not.
  EXPECT_NEAR(whole(preset("gpt-oss-120b")).active_params(false) / 5.13e9, 1.0, 0.01);
  // DeepSeek-V3: "37B are activated for each token", a two-digit figure (37 +- 0.5B) that does not
  // say whether the embedding tables count: it lies between the counts without the input table
  // (36.6B, OpenAI's convention) and with it (37.6B).
  const auto ds = whole(preset("deepseek-v3"));
  EXPECT_NEAR(ds.active_params(false) / 1e9, 37.0, 0.5);
  EXPECT_LT(ds.active_params(false), 37e9);
  EXPECT_GT(ds.active_params(), 37e9);
  // Qwen3-30B-A3B: "3.3B activated", 3.3 +- 0.05B.
  EXPECT_NEAR(whole(preset("qwen3-30b-a3b")).active_params() / 1e9, 3.3, 0.06);
}

TEST(MoeModels, ExpertParallelismSplitsOnlyTheExperts) {
  const auto m = preset("mixtral-8x7b");
  models::BuildOptions one{1, 2, models::Attention::Flash};
  models::BuildOptions eight = one;
  eight.expert = 8;
  const auto a = m.build(one), b = m.build(eight);
  double ea = 0, eb = 0;
  for (const auto& l : a.layers) ea += l.expert_params();
  for (const auto& l : b.layers) eb += l.expert_params();
  EXPECT_NEAR(eb * 8, ea, 1.0);
  EXPECT_NEAR(a.params() - ea, b.params() - eb, 1.0);  // the dense part stays whole
  // Model FLOPs follow the active parameters, whatever the split: every GPU computes its own
  // tokens' worth of expert work (top-2 of 8 experts).
  EXPECT_NEAR(a.model_flops() / b.model_flops(), 1.0, 1e-9);
  const double tokens = 32768;
  EXPECT_GT(a.model_flops(), 6.0 * (a.active_params() - 32000.0 * 4096) * tokens * 0.99);
}
