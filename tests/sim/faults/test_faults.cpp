#include <gtest/gtest.h>

#include <cmath>

#include "sim/faults/faults.hpp"
#include "strategies/spec.hpp"

using namespace dtsim;

TEST(Faults, YoungAndDalyIntervals) {
  const double delta = 60, m = 3.09 * 3600;
  EXPECT_DOUBLE_EQ(faults::young_interval(delta, m), std::sqrt(2 * delta * m));
  const double x = delta / (2 * m);
  EXPECT_DOUBLE_EQ(faults::daly_interval(delta, m), std::sqrt(2 * delta * m) * (1 + std::sqrt(x) / 3 + x / 9) - delta);
  EXPECT_DOUBLE_EQ(faults::daly_interval(1000, 400), 400);  // delta >= 2M: checkpoint every M
}

TEST(Faults, DalyIntervalMinimisesExpectedWallTime) {
  const double delta = 60, restart = 600, m = 3 * 3600, solve = 1e6;
  const double best = faults::expected_wall_time(solve, faults::daly_interval(delta, m), delta, restart, m);
  for (double tau : {300.0, 600.0, 2000.0, 3600.0, 7200.0})
    EXPECT_LE(best, faults::expected_wall_time(solve, tau, delta, restart, m) * (1 + 1e-6)) << tau;
}

TEST(Faults, WithoutFailuresOnlyCheckpointsCost) {
  EXPECT_DOUBLE_EQ(faults::expected_wall_time(3600, 600, 60, 600, INFINITY), 3600.0 * 660 / 600);
  // A very reliable machine approaches that limit.
  EXPECT_NEAR(faults::expected_wall_time(3600, 600, 60, 600, 1e12), 3600.0 * 660 / 600, 1e-3);
}

TEST(Faults, MoreGpusFailMoreOften) {
  faults::FaultSpec f;
  f.enabled = true;
  f.gpu_mtbf_s = 50700.0 * 3600;  // Llama 3: 419 interruptions in 54 days on 16,384 GPUs
  f.checkpoint_save_s = 60;
  f.restart_s = 600;
  auto small = faults::analyse_faults(f, 1024, 128, 1.0, 100000);
  auto big = faults::analyse_faults(f, 16384, 2048, 1.0, 100000);
  EXPECT_NEAR(big.system_mtbf_s / 3600, 54.0 * 24 / 419, 0.02);  // 3.09 h, as reported
  EXPECT_NEAR(small.system_mtbf_s / big.system_mtbf_s, 16.0, 1e-9);
  EXPECT_GT(small.goodput, big.goodput);
  EXPECT_GT(big.expected_time_s, big.ideal_time_s);
}

TEST(InputPipeline, SlowerOfCpuAndStorage) {
  strategies::InputPipeline ip;
  ip.enabled = true;
  ip.cpu_seconds_per_sample = 0.03;
  ip.workers_per_gpu = 2;
  ip.sample_bytes = 1e6;
  ip.storage_bandwidth_per_gpu = 1e9;
  EXPECT_DOUBLE_EQ(ip.seconds(16), 16 * 0.03 / 2);  // CPU-bound: 0.24 s
  ip.storage_bandwidth_per_gpu = 1e7;
  EXPECT_DOUBLE_EQ(ip.seconds(16), 16 * 1e6 / 1e7);  // storage-bound: 1.6 s
}
