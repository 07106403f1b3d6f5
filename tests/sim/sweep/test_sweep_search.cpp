// The sweep's engine as a library (sim/sweep/search.hpp), and the build options every consumer
// of a scenario takes (sim/config/build_options.hpp).
#include <gtest/gtest.h>

#include "run_dtsim.hpp"
#include "sim/config/build_options.hpp"
#include "sim/core/errors.hpp"
#include "sim/sweep/search.hpp"

namespace {

std::string scenario(const std::string& name) { return dtsim::test::source_dir() + "/scenarios/" + name; }

TEST(SweepSearch, RanksFittingCandidatesFirstAndReplaysTheBest) {
  dtsim::sweep::SearchOptions o;
  o.jobs = 2;
  o.confirm = 3;
  const auto r = dtsim::sweep::search(scenario("gpt2-dp8-a100.json"), o);
  ASSERT_GT(r.ranked.size(), 3u);
  EXPECT_EQ(r.candidates.size(), r.ranked.size() + r.failed);
  EXPECT_EQ(r.closed_form + r.replayed, r.candidates.size());
  ASSERT_GT(r.fitting, 0u);
  for (std::size_t i = 0; i < r.ranked.size(); ++i) EXPECT_EQ(r.ranked[i].fits, i < r.fitting) << i;
  // Ranked by step time (the scenario gives no training length): the best three replayed, each
  // with the closed form's estimate beside it.
  EXPECT_FALSE(r.has_length);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(r.ranked[i].replayed) << i;
    EXPECT_GT(r.ranked[i].estimate, 0) << i;
  }
  for (std::size_t i = 1; i < r.fitting; ++i) EXPECT_LE(r.ranked[i - 1].step, r.ranked[i].step) << i;
}

TEST(SweepSearch, AFlagsBadListIsAnInputErrorNamingTheFlag) {
  try {
    dtsim::sweep::SearchOptions o;
    o.gpus = "8,,16";
    (void)dtsim::sweep::search(scenario("gpt2-dp8-a100.json"), o);
    FAIL() << "no error";
  } catch (const dtsim::InputError& e) {
    EXPECT_EQ(e.pointer(), "--gpus");
  }
}

TEST(BuildOptions, TheSliceIsTheScenariosAndTheWholeModelIsUnsplit) {
  dtsim::test::TempDir dir;
  const auto f = dir.file("s.json", R"({"extends": ")" + scenario("gpt2-dp8-a100.json") +
                                        R"(", "parallelism": {"data": 4, "tensor": 2, "sequence_parallel": true,
                                        "micro_batch_size": 2}, "training": {"global_batch_size": 64}})");
  const auto s = dtsim::config::load_scenario(f);
  const auto o = dtsim::config::build_options(s);
  EXPECT_EQ(o.micro_batch, 2);
  EXPECT_EQ(o.tensor, 2);
  EXPECT_TRUE(o.sequence_parallel);
  const auto whole = dtsim::config::whole_model_options(s);
  EXPECT_EQ(whole.tensor, 1);
  EXPECT_FALSE(whole.sequence_parallel);
  EXPECT_EQ(whole.micro_batch, 2);
  // One tensor rank holds about half the weights (position embeddings are replicated).
  const double slice = s.model.build(o).params(), all = s.model.build(whole).params();
  EXPECT_GT(slice, 0.45 * all);
  EXPECT_LT(slice, 0.55 * all);
}

}  // namespace
