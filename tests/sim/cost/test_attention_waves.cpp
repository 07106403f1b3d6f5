// FlashAttention-2's grid over the SMs (issue 30, item 1: few heads leave SMs idle): list
// scheduling against its closed forms, the factor against dtsim's own H100 kernel timings.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "sim/cost/attention_waves.hpp"

using namespace dtsim;

namespace {

models::Kernel flash(std::int64_t batch_x_heads, std::int64_t seq, std::int64_t head_dim, bool backward) {
  models::Kernel k;
  k.batch = batch_x_heads;
  k.m = k.n = seq;
  k.k = head_dim;
  k.causal = true;
  k.role = backward ? models::KernelRole::FlashBackward : models::KernelRole::FlashForward;
  return k;
}

double factor(std::int64_t bh, std::int64_t seq, std::int64_t d, bool backward) {
  return cost::flash_grid_factor(cost::AttentionImpl::Flash2, flash(bh, seq, d, backward), 132);
}

}  // namespace

TEST(AttentionWaves, EqualBlocksInWholeWavesFillEverySlot) {
  EXPECT_DOUBLE_EQ(cost::grid_fill(std::vector<double>(3 * 132, 1.0), 132), 1.0);
  // One block more than a wave: two waves for 133 blocks of work.
  EXPECT_DOUBLE_EQ(cost::grid_fill(std::vector<double>(133, 1.0), 132), 133.0 / (2.0 * 132.0));
}

TEST(AttentionWaves, OneCausalHeadOnEnoughSlotsWaitsForItsLongestBlock) {
  // Blocks of work 1..n, each on a slot of its own: the kernel lasts n, the slots are busy
  // n(n+1)/2 of n x slots.
  std::vector<double> jobs(64);
  std::iota(jobs.begin(), jobs.end(), 1.0);
  EXPECT_DOUBLE_EQ(cost::grid_fill(jobs, 132), 64.0 * 65.0 / 2.0 / (132.0 * 64.0));
}

TEST(AttentionWaves, ListSchedulingPlacesEachBlockOnTheFirstFreeSlot) {
  // Two slots, blocks 3, 1, 1, 1: the second slot takes the three short ones (3) while the first
  // runs the long one (3): makespan 3, busy 6 of 6.
  EXPECT_DOUBLE_EQ(cost::grid_fill({3, 1, 1, 1}, 2), 1.0);
  // Blocks 1, 1, 3 on two slots: the long one starts at 1, ends at 4; busy 5 of 8.
  EXPECT_DOUBLE_EQ(cost::grid_fill({1, 1, 3}, 2), 5.0 / 8.0);
}

TEST(AttentionWaves, AsManyBlocksAsTheBenchmarkRunAtThePublishedRate) {
  // The published rates' grid at 8k, head dim 128: batch 2 x 16 heads. Llama 3 8B's 32 heads at
  // batch 1 are as many blocks; wider grids are never priced above the published rate.
  EXPECT_DOUBLE_EQ(factor(32, 8192, 128, false), 1.0);
  EXPECT_DOUBLE_EQ(factor(32, 8192, 128, true), 1.0);
  EXPECT_DOUBLE_EQ(factor(1024, 8192, 128, false), 1.0);
  // Other implementations and profiles without an SM count: unchanged.
  EXPECT_DOUBLE_EQ(cost::flash_grid_factor(cost::AttentionImpl::Flash3, flash(4, 8192, 128, false), 132), 1.0);
  EXPECT_DOUBLE_EQ(cost::flash_grid_factor(cost::AttentionImpl::Flash2, flash(4, 8192, 128, false), 0), 1.0);
}

TEST(AttentionWaves, FourHeadsAgainstThirtyTwoAsTimedOnAnH100) {
  // dtsim's own H100 run (docs/gpu_check.md, "Flash attention"; results.json attention rows):
  // PyTorch SDPA's FlashAttention-2, causal, 8192 x head dim 128. 32 heads (batch 1): forward
  // 306.1 TFLOP/s, forward + backward 282.9; 4 heads and one KV head (the TP-8 slice): 158.8 and
  // 178.8. Forward alone 0.519 of the 32 heads' rate, forward + backward 0.632.
  const double fwd = factor(4, 8192, 128, false), bwd = factor(4, 8192, 128, true);
  const double both = 3.5 / (1.0 / fwd + 2.5 / bwd);  // backward has 2.5x the forward's FLOPs
  // The forward alone is 10 % short of the measured loss (0.572): what else four heads cost is
  // not modelled; the backward, most of the time, carries the whole within 5 %.
  EXPECT_NEAR(fwd, 158.8 / 306.1, 0.12 * 158.8 / 306.1);
  EXPECT_NEAR(both, 178.8 / 282.9, 0.05 * 178.8 / 282.9);
}

TEST(AttentionWaves, FewerBlocksThanTheBenchmarkAtOneKilotoken) {
  // GPT-2 XL, batch 8 x 25 heads at 1024, head dim 64, against the benchmark's 16 x 32: 1,600
  // forward blocks on 264 slots (a ragged last wave of causal blocks) against 4,096.
  const double f = factor(8 * 25, 1024, 64, false);
  EXPECT_LT(f, 1.0);
  EXPECT_GT(f, 0.85);
}
