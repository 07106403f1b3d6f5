// PyTorch's caching allocator replayed (strategies/caching_allocator.hpp) against the rules of
// c10/cuda/CUDACachingAllocator.cpp, and a step's replay against what this project's own H100
// steps reserved (docs/gpu_check.md, "Peak memory").
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "scenario_helpers.hpp"
#include "sim/config/scenario.hpp"
#include "sim/results/result.hpp"
#include "strategies/caching_allocator.hpp"

namespace dtsim {
namespace {

constexpr std::int64_t kMiB = 1 << 20;
constexpr double kGiB = 1024.0 * 1024 * 1024;
const std::string kRoot = DTSIM_SOURCE_DIR;

TEST(CachingAllocator, RoundsRequestsAndSizesSegmentsByPool) {
  EXPECT_EQ(strategies::allocator_round(1), 512);
  EXPECT_EQ(strategies::allocator_round(513), 1024);
  EXPECT_EQ(strategies::allocator_segment(kMiB), 2 * kMiB);              // small pool
  EXPECT_EQ(strategies::allocator_segment(kMiB + 512), 20 * kMiB);       // large, under 10 MiB
  EXPECT_EQ(strategies::allocator_segment(10 * kMiB), 10 * kMiB);        // its own, rounded to 2 MiB
  EXPECT_EQ(strategies::allocator_segment(11 * kMiB + 512), 12 * kMiB);
}

TEST(CachingAllocator, SmallRequestsShareOneSegment) {
  strategies::CachingAllocator a;
  for (int i = 0; i < 4; ++i) a.allocate(100 * 1024);
  EXPECT_EQ(a.reserved(), 2 * kMiB);
  EXPECT_EQ(a.allocated(), 4 * 100 * 1024);
}

TEST(CachingAllocator, AFreedBlockServesTheNextRequestThatFits) {
  strategies::CachingAllocator a;
  a.free(a.allocate(64.0 * kMiB));
  const int b = a.allocate(64.0 * kMiB);
  EXPECT_EQ(a.reserved(), 64 * kMiB);
  a.free(b);
  a.allocate(40.0 * kMiB);  // split: 24 MiB left cached
  EXPECT_EQ(a.reserved(), 64 * kMiB);
  EXPECT_EQ(a.allocated(), 40 * kMiB);
}

TEST(CachingAllocator, SplitRemaindersThatAreTooSmallBecomeHoles) {
  // 64 MiB cached, split for 40; a 32 MiB request finds only the 24 MiB rest: a new segment.
  // The peak reserved (96) exceeds the peak allocated (72) by that hole.
  strategies::CachingAllocator a;
  a.free(a.allocate(64.0 * kMiB));
  a.allocate(40.0 * kMiB);
  a.allocate(32.0 * kMiB);
  EXPECT_EQ(a.peak_reserved(), 96 * kMiB);
  EXPECT_EQ(a.peak_allocated(), 72 * kMiB);
}

TEST(CachingAllocator, LargeBlocksSplitOnlyWithMoreThanOneMebibyteLeft) {
  strategies::CachingAllocator a;
  a.free(a.allocate(12.0 * kMiB));
  a.allocate(11.0 * kMiB);  // 1 MiB left: kept whole, the tensor holds 12
  EXPECT_EQ(a.allocated(), 12 * kMiB);
}

TEST(CachingAllocator, FreedNeighboursMergeIntoOneBlock) {
  // Three pieces of one 60 MiB segment freed out of order merge back: a 60 MiB request reuses it.
  strategies::CachingAllocator a;
  a.free(a.allocate(60.0 * kMiB));
  const int x = a.allocate(20.0 * kMiB), y = a.allocate(20.0 * kMiB), z = a.allocate(20.0 * kMiB);
  a.free(x);
  a.free(z);
  a.free(y);
  a.allocate(60.0 * kMiB);
  EXPECT_EQ(a.reserved(), 60 * kMiB);
}

TEST(CachingAllocator, RefusesAFreeOfWhatItDidNotHandOut) {
  strategies::CachingAllocator a;
  const int x = a.allocate(kMiB);
  a.free(x);
  EXPECT_THROW(a.free(x), std::logic_error);
  EXPECT_THROW(a.free(99), std::logic_error);
}

// The four single-H100 steps of docs/gpu_check.md under eager PyTorch: measured
// max_memory_allocated and max_memory_reserved (GiB, docs/gpu_check/h100-2026-11-26/summary.txt).
struct Measured {
  const char* scenario;
  double allocated, reserved;
  double tolerance = 0.02;
};

TEST(CachingAllocatorStep, ReservedMatchesTheMeasuredH100StepsWithinAFewPercent) {
  // ResNet-50: 1.16 GiB of cache against 1.46 measured, reserved 3.5 % short. The trace sizes each
  // batch norm's output as the tensor it returns since 2026-11-28 (1.5 times it before, which
  // left 1.43 GiB of cache).
  for (const Measured m : {Measured{"gpt2-xl-1gpu", 45.46, 47.24}, Measured{"llama3-8b-tp8-slice-1gpu", 27.20, 27.58},
                           Measured{"resnet50-1gpu", 10.95, 12.41, 0.04}}) {
    auto s = config::load_scenario(kRoot + "/scenarios/gpu_check/" + m.scenario + ".json");
    s.training.memory.allocator = strategies::Allocator::PytorchCaching;
    const auto r = results::memory_only(s);
    const double allocated = (r.memory.peak() - s.reserved_bytes) / kGiB;
    const double reserved = allocated + r.allocator_slack / kGiB;
    // Where dtsim's allocated peak is within 2 % of the measured one, so is the reserved peak
    // (ResNet-50: 4 %).
    ASSERT_NEAR(allocated, m.allocated, 0.02 * m.allocated) << m.scenario;
    EXPECT_NEAR(reserved, m.reserved, m.tolerance * m.reserved) << m.scenario;
    // The cache is what the measurement left above the tensors, not the 0.845 x activations
    // of a varying-shape workload (7-19 GiB on these steps).
    EXPECT_LT(r.allocator_slack / kGiB, 2 * (m.reserved - m.allocated) + 0.1) << m.scenario;
  }
}

TEST(CachingAllocatorStep, EagerLossLeavesALogitsSizedHole) {
  // Llama 3 8B, 4 layers, 8,192 tokens: the loss's fp32 logits (3.9 GiB) dominate what the
  // cache keeps; measured 3.44 GiB above the allocated peak. The replay keeps at least half a
  // logits tensor and no more than the measurement.
  auto s = config::load_scenario(kRoot + "/scenarios/gpu_check/llama3-8b-tp1-4layers-1gpu.json");
  s.training.memory.allocator = strategies::Allocator::PytorchCaching;
  const double slack = results::memory_only(s).allocator_slack / kGiB;
  const double logits = 8192.0 * 128256 * 4 / kGiB;
  EXPECT_GT(slack, logits / 2);
  EXPECT_LT(slack, 3.44);
}

}  // namespace
}  // namespace dtsim
