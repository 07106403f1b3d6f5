// Kendall's tau-b and the top-1 hit that `validate --suite` reports for each ranking set.
#include <gtest/gtest.h>

#include "sim/results/ranking.hpp"

using dtsim::results::kendall_tau_b;
using dtsim::results::top1_hit;

TEST(Ranking, TauIsOneForTheSameOrderAndMinusOneReversed) {
  EXPECT_DOUBLE_EQ(*kendall_tau_b({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0);
  EXPECT_DOUBLE_EQ(*kendall_tau_b({1, 2, 3, 4}, {40, 30, 20, 10}), -1.0);
}

TEST(Ranking, TauCountsConcordantAndDiscordantPairs) {
  // One swapped neighbour pair among 4 items: 5 concordant, 1 discordant of 6 pairs.
  EXPECT_NEAR(*kendall_tau_b({1, 2, 3, 4}, {1, 3, 2, 4}), 4.0 / 6.0, 1e-12);
}

TEST(Ranking, TauBCorrectsForTies) {
  // scipy.stats.kendalltau's documented example: x = [12, 2, 1, 12, 2], y = [1, 4, 7, 1, 0]
  // gives tau-b -0.47140452079103173. By hand: 2 concordant and 6 discordant of 10 pairs, 2 tied
  // in x and 1 in y, so (2 - 6) / sqrt((10 - 2)(10 - 1)).
  EXPECT_NEAR(*kendall_tau_b({12, 2, 1, 12, 2}, {1, 4, 7, 1, 0}), -0.47140452079103173, 1e-12);
}

TEST(Ranking, TauIsUndefinedForOneItemOrAllTied) {
  EXPECT_FALSE(kendall_tau_b({1}, {2}).has_value());
  EXPECT_FALSE(kendall_tau_b({1, 1, 1}, {1, 2, 3}).has_value());
}

TEST(Ranking, TopOneHitWhenThePredictedFastestWasMeasuredFastest) {
  EXPECT_TRUE(top1_hit({3.0, 1.0, 2.0}, {30, 12, 20}));
  EXPECT_FALSE(top1_hit({3.0, 1.0, 2.0}, {30, 22, 20}));
  EXPECT_TRUE(top1_hit({3.0, 1.0, 2.0}, {30, 20, 20}));  // a measured tie: either counts
  EXPECT_FALSE(top1_hit({}, {}));
}
