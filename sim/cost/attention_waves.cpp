#include "sim/cost/attention_waves.hpp"
#include "sim/cost/attention_rates.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <queue>
#include <tuple>

namespace dtsim::cost {

namespace {

// FlashAttention-2's launch on sm90 (Dao-AILab/flash-attention @0251105, csrc/flash_attn/src/; PyTorch's
// vendored copy launches the same tiles: pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128,
// 128, 64, 4, ...>> and flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<..<128, 64, 128, 8, ...>> at head
// dim 128 in this project's H200 profiles):
// - forward: grid (ceil(seqlen_q / kBlockM), b, h), kBlockM = 128 at head dims 64 and 128
//   (flash_fwd_launch_template.h, run_mha_fwd_hdim64/128); block m covers query rows [128m,
//   128m + 128) and, causal, the key blocks up to its own: work m + 1, lightest first. CTAs of 4
//   warps, two resident per SM (the file's "we get 2 CTAs per SM" for its 4-warp tiles).
// - backward: grid (ceil(seqlen_k / kBlockN), b, h), kBlockN = 128 (flash_bwd_launch_template.h,
//   run_flash_bwd_seqk_parallel, run_mha_bwd_hdim64/128 on a device with >= 144 KB of shared
//   memory per block); block n covers key rows [128n, 128n + 128) and, causal, every query block
//   from its own on: work (blocks - n), heaviest first. 8-warp CTAs that need more than half an
//   SM's shared memory: one resident per SM.
constexpr int kBlockRows = 128;
constexpr int kForwardCtasPerSm = 2;
constexpr int kBackwardCtasPerSm = 1;
// The benchmark behind the published rates (benchmarks/benchmark_flash_attention.py, attention.json
// source 3): batch = 16k / seqlen, hidden 2,048 = heads x head dim.
constexpr double kBenchTokens = 16384.0, kBenchHidden = 2048.0;
// Beyond this many CTAs per slot the grid is as full as the benchmark's (its 2,048-4,096 CTAs):
// no simulation needed, and the factor is 1.
constexpr double kFullWaves = 64.0;

std::vector<double> blocks(std::int64_t heads_x_batch, std::int64_t rows, bool causal, bool backward) {
  const auto n = static_cast<std::int64_t>(std::ceil(static_cast<double>(rows) / kBlockRows));
  std::vector<double> one;
  for (std::int64_t i = 0; i < n; ++i)
    one.push_back(!causal ? 1.0 : backward ? static_cast<double>(n - i) : static_cast<double>(i + 1));
  std::vector<double> jobs;
  jobs.reserve(static_cast<std::size_t>(heads_x_batch) * one.size());
  for (std::int64_t g = 0; g < heads_x_batch; ++g) jobs.insert(jobs.end(), one.begin(), one.end());
  return jobs;
}

double fill(std::int64_t heads_x_batch, std::int64_t rows, bool causal, bool backward, int slots) {
  static thread_local std::map<std::tuple<std::int64_t, std::int64_t, bool, bool, int>, double> memo;
  const auto key = std::make_tuple(heads_x_batch, rows, causal, backward, slots);
  if (auto it = memo.find(key); it != memo.end()) return it->second;
  return memo[key] = grid_fill(blocks(heads_x_batch, rows, causal, backward), slots);
}

}  // namespace

double grid_fill(const std::vector<double>& jobs, int slots) {
  if (jobs.empty() || slots <= 0) return 1.0;
  std::priority_queue<double, std::vector<double>, std::greater<>> free_at;
  for (int i = 0; i < slots; ++i) free_at.push(0.0);
  double total = 0, makespan = 0;
  for (double j : jobs) {
    const double start = free_at.top();
    free_at.pop();
    free_at.push(start + j);
    makespan = std::max(makespan, start + j);
    total += j;
  }
  return total / (static_cast<double>(slots) * makespan);
}

double flash_grid_factor(AttentionImpl impl, const models::Kernel& k, int sm_count) {
  if (!flash_attention_2(impl) || sm_count <= 0 || k.k <= 0) return 1.0;
  const bool backward = k.role == models::KernelRole::FlashBackward;
  const int slots = sm_count * (backward ? kBackwardCtasPerSm : kForwardCtasPerSm);
  const std::int64_t rows = backward ? k.n : k.m;
  const bool causal = k.causal && k.m == k.n;  // a context-parallel chunk's blocks: not modelled, even
  const double ctas = static_cast<double>(k.batch) * std::ceil(static_cast<double>(rows) / kBlockRows);
  if (ctas >= kFullWaves * slots) return 1.0;
  const auto bench_bh = static_cast<std::int64_t>(std::max(1.0, std::round(kBenchTokens / static_cast<double>(rows))) *
                                                  std::max(1.0, std::round(kBenchHidden / static_cast<double>(k.k))));
  const double ours = fill(k.batch, rows, causal, backward, slots);
  const double bench = fill(bench_bh, rows, causal, backward, slots);
  return std::min(1.0, ours / bench);
}

}  // namespace dtsim::cost
