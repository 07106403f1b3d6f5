#include "sim/cost/attention_rates.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include "sim/core/interpolate.hpp"

namespace dtsim::cost {

namespace {

struct Rate {
  const char* id;  // the row of /work/shared/calibration/microbench/attention.json
  AttentionImpl impl;
  int head_dim;
  bool causal;
  int seq;
  double tflops;
};

// Forward, H100 80GB SXM5, fp16, batch x seq = 16k, hidden 2048: the bar labels of the
// FlashAttention-3 paper's forward figure (Dao-AILab/flash-attention assets/flash3_fp16_fwd.png
// @7ef2484, attention.json source 0). FLOP convention: 4·b·h·s²·d, halved when causal
// (benchmarks/benchmark_flash_attention.py, source 3).
constexpr Rate kForward[] = {
    {"attn-001", AttentionImpl::SdpaMath, 64, false, 512, 52},
    {"attn-002", AttentionImpl::SdpaMath, 64, false, 1024, 63},
    {"attn-003", AttentionImpl::SdpaMath, 64, false, 2048, 67},
    {"attn-004", AttentionImpl::SdpaMath, 64, false, 4096, 72},
    {"attn-005", AttentionImpl::SdpaMath, 64, false, 8192, 73},
    {"attn-007", AttentionImpl::Flash2, 64, false, 512, 282},
    {"attn-008", AttentionImpl::Flash2, 64, false, 1024, 306},
    {"attn-009", AttentionImpl::Flash2, 64, false, 2048, 318},
    {"attn-010", AttentionImpl::Flash2, 64, false, 4096, 321},
    {"attn-011", AttentionImpl::Flash2, 64, false, 8192, 322},
    {"attn-012", AttentionImpl::Flash2, 64, false, 16384, 324},
    {"attn-013", AttentionImpl::Cudnn, 64, false, 512, 335},
    {"attn-014", AttentionImpl::Cudnn, 64, false, 1024, 373},
    {"attn-015", AttentionImpl::Cudnn, 64, false, 2048, 395},
    {"attn-016", AttentionImpl::Cudnn, 64, false, 4096, 408},
    {"attn-017", AttentionImpl::Cudnn, 64, false, 8192, 412},
    {"attn-018", AttentionImpl::Cudnn, 64, false, 16384, 413},
    {"attn-019", AttentionImpl::Flash3, 64, false, 512, 333},
    {"attn-020", AttentionImpl::Flash3, 64, false, 1024, 392},
    {"attn-021", AttentionImpl::Flash3, 64, false, 2048, 460},
    {"attn-022", AttentionImpl::Flash3, 64, false, 4096, 476},
    {"attn-023", AttentionImpl::Flash3, 64, false, 8192, 496},
    {"attn-024", AttentionImpl::Flash3, 64, false, 16384, 497},
    {"attn-025", AttentionImpl::SdpaMath, 64, true, 512, 16},
    {"attn-026", AttentionImpl::SdpaMath, 64, true, 1024, 18},
    {"attn-027", AttentionImpl::SdpaMath, 64, true, 2048, 18},
    {"attn-028", AttentionImpl::SdpaMath, 64, true, 4096, 18},
    {"attn-029", AttentionImpl::SdpaMath, 64, true, 8192, 18},
    {"attn-031", AttentionImpl::Flash2, 64, true, 512, 180},
    {"attn-032", AttentionImpl::Flash2, 64, true, 1024, 229},
    {"attn-033", AttentionImpl::Flash2, 64, true, 2048, 262},
    {"attn-034", AttentionImpl::Flash2, 64, true, 4096, 284},
    {"attn-035", AttentionImpl::Flash2, 64, true, 8192, 295},
    {"attn-036", AttentionImpl::Flash2, 64, true, 16384, 299},
    {"attn-037", AttentionImpl::Cudnn, 64, true, 512, 225},
    {"attn-038", AttentionImpl::Cudnn, 64, true, 1024, 288},
    {"attn-039", AttentionImpl::Cudnn, 64, true, 2048, 334},
    {"attn-040", AttentionImpl::Cudnn, 64, true, 4096, 363},
    {"attn-041", AttentionImpl::Cudnn, 64, true, 8192, 379},
    {"attn-042", AttentionImpl::Cudnn, 64, true, 16384, 388},
    {"attn-043", AttentionImpl::Flash3, 64, true, 512, 197},
    {"attn-044", AttentionImpl::Flash3, 64, true, 1024, 265},
    {"attn-045", AttentionImpl::Flash3, 64, true, 2048, 371},
    {"attn-046", AttentionImpl::Flash3, 64, true, 4096, 420},
    {"attn-047", AttentionImpl::Flash3, 64, true, 8192, 460},
    {"attn-048", AttentionImpl::Flash3, 64, true, 16384, 473},
    {"attn-049", AttentionImpl::SdpaMath, 128, false, 512, 74},
    {"attn-050", AttentionImpl::SdpaMath, 128, false, 1024, 100},
    {"attn-051", AttentionImpl::SdpaMath, 128, false, 2048, 119},
    {"attn-052", AttentionImpl::SdpaMath, 128, false, 4096, 133},
    {"attn-053", AttentionImpl::SdpaMath, 128, false, 8192, 139},
    {"attn-055", AttentionImpl::Flash2, 128, false, 512, 309},
    {"attn-056", AttentionImpl::Flash2, 128, false, 1024, 350},
    {"attn-057", AttentionImpl::Flash2, 128, false, 2048, 362},
    {"attn-058", AttentionImpl::Flash2, 128, false, 4096, 368},
    {"attn-059", AttentionImpl::Flash2, 128, false, 8192, 370},
    {"attn-060", AttentionImpl::Flash2, 128, false, 16384, 370},
    {"attn-061", AttentionImpl::Cudnn, 128, false, 512, 497},
    {"attn-062", AttentionImpl::Cudnn, 128, false, 1024, 574},
    {"attn-063", AttentionImpl::Cudnn, 128, false, 2048, 617},
    {"attn-064", AttentionImpl::Cudnn, 128, false, 4096, 609},
    {"attn-065", AttentionImpl::Cudnn, 128, false, 8192, 600},
    {"attn-066", AttentionImpl::Cudnn, 128, false, 16384, 595},
    {"attn-067", AttentionImpl::Flash3, 128, false, 512, 467},
    {"attn-068", AttentionImpl::Flash3, 128, false, 1024, 565},
    {"attn-069", AttentionImpl::Flash3, 128, false, 2048, 625},
    {"attn-070", AttentionImpl::Flash3, 128, false, 4096, 638},
    {"attn-071", AttentionImpl::Flash3, 128, false, 8192, 646},
    {"attn-072", AttentionImpl::Flash3, 128, false, 16384, 648},
    {"attn-073", AttentionImpl::SdpaMath, 128, true, 512, 26},
    {"attn-074", AttentionImpl::SdpaMath, 128, true, 1024, 31},
    {"attn-075", AttentionImpl::SdpaMath, 128, true, 2048, 34},
    {"attn-076", AttentionImpl::SdpaMath, 128, true, 4096, 35},
    {"attn-077", AttentionImpl::SdpaMath, 128, true, 8192, 35},
    {"attn-079", AttentionImpl::Flash2, 128, true, 512, 191},
    {"attn-080", AttentionImpl::Flash2, 128, true, 1024, 260},
    {"attn-081", AttentionImpl::Flash2, 128, true, 2048, 298},
    {"attn-082", AttentionImpl::Flash2, 128, true, 4096, 319},
    {"attn-083", AttentionImpl::Flash2, 128, true, 8192, 333},
    {"attn-084", AttentionImpl::Flash2, 128, true, 16384, 335},
    {"attn-085", AttentionImpl::Cudnn, 128, true, 512, 315},
    {"attn-086", AttentionImpl::Cudnn, 128, true, 1024, 410},
    {"attn-087", AttentionImpl::Cudnn, 128, true, 2048, 484},
    {"attn-088", AttentionImpl::Cudnn, 128, true, 4096, 518},
    {"attn-089", AttentionImpl::Cudnn, 128, true, 8192, 529},
    {"attn-090", AttentionImpl::Cudnn, 128, true, 16384, 539},
    {"attn-091", AttentionImpl::Flash3, 128, true, 512, 292},
    {"attn-092", AttentionImpl::Flash3, 128, true, 1024, 423},
    {"attn-093", AttentionImpl::Flash3, 128, true, 2048, 521},
    {"attn-094", AttentionImpl::Flash3, 128, true, 4096, 579},
    {"attn-095", AttentionImpl::Flash3, 128, true, 8192, 602},
    {"attn-096", AttentionImpl::Flash3, 128, true, 16384, 616},
    {"attn-097", AttentionImpl::Flash2, 256, false, 512, 275},
    {"attn-098", AttentionImpl::Flash2, 256, false, 1024, 313},
    {"attn-099", AttentionImpl::Flash2, 256, false, 2048, 321},
    {"attn-100", AttentionImpl::Flash2, 256, false, 4096, 323},
    {"attn-101", AttentionImpl::Flash2, 256, false, 8192, 324},
    {"attn-102", AttentionImpl::Flash2, 256, false, 16384, 326},
    {"attn-103", AttentionImpl::Cudnn, 256, false, 512, 470},
    {"attn-104", AttentionImpl::Cudnn, 256, false, 1024, 546},
    {"attn-105", AttentionImpl::Cudnn, 256, false, 2048, 580},
    {"attn-106", AttentionImpl::Cudnn, 256, false, 4096, 581},
    {"attn-107", AttentionImpl::Cudnn, 256, false, 8192, 580},
    {"attn-108", AttentionImpl::Cudnn, 256, false, 16384, 581},
    {"attn-109", AttentionImpl::Flash3, 256, false, 512, 482},
    {"attn-110", AttentionImpl::Flash3, 256, false, 2048, 707},
    {"attn-111", AttentionImpl::Flash3, 256, false, 4096, 736},
    {"attn-112", AttentionImpl::Flash3, 256, false, 8192, 746},
    {"attn-113", AttentionImpl::Flash3, 256, false, 16384, 756},
    {"attn-114", AttentionImpl::Flash2, 256, true, 512, 208},
    {"attn-115", AttentionImpl::Flash2, 256, true, 1024, 251},
    {"attn-116", AttentionImpl::Flash2, 256, true, 2048, 278},
    {"attn-117", AttentionImpl::Flash2, 256, true, 4096, 293},
    {"attn-118", AttentionImpl::Flash2, 256, true, 8192, 297},
    {"attn-119", AttentionImpl::Flash2, 256, true, 16384, 298},
    {"attn-120", AttentionImpl::Cudnn, 256, true, 512, 308},
    {"attn-121", AttentionImpl::Cudnn, 256, true, 1024, 391},
    {"attn-122", AttentionImpl::Cudnn, 256, true, 2048, 450},
    {"attn-123", AttentionImpl::Cudnn, 256, true, 4096, 483},
    {"attn-124", AttentionImpl::Cudnn, 256, true, 8192, 497},
    {"attn-125", AttentionImpl::Cudnn, 256, true, 16384, 509},
    {"attn-126", AttentionImpl::Flash3, 256, true, 512, 286},
    {"attn-127", AttentionImpl::Flash3, 256, true, 1024, 427},
    {"attn-128", AttentionImpl::Flash3, 256, true, 2048, 537},
    {"attn-129", AttentionImpl::Flash3, 256, true, 4096, 612},
    {"attn-130", AttentionImpl::Flash3, 256, true, 8192, 628},
    {"attn-131", AttentionImpl::Flash3, 256, true, 16384, 642},
};

// Forward + backward, same machine and sweep: the FlashAttention-2 README's H100 figure
// (assets/flash2_h100_fwd_bwd_benchmark.png @4f285b3, attention.json source 1). FLOPs 3.5x forward.
// The figure's bottom-row captions (the causal panels) are cut off; attention.json reads them as
// causal, as the A100 twin figure's captions (source 2) are.
constexpr Rate kForwardBackward[] = {
    {"attn-138", AttentionImpl::Flash2, 64, false, 512, 215},
    {"attn-139", AttentionImpl::Flash2, 64, false, 1024, 254},
    {"attn-140", AttentionImpl::Flash2, 64, false, 2048, 274},
    {"attn-141", AttentionImpl::Flash2, 64, false, 4096, 288},
    {"attn-142", AttentionImpl::Flash2, 64, false, 8192, 294},
    {"attn-143", AttentionImpl::Flash2, 64, false, 16384, 296},
    {"attn-150", AttentionImpl::Flash2, 128, false, 512, 248},
    {"attn-151", AttentionImpl::Flash2, 128, false, 1024, 294},
    {"attn-152", AttentionImpl::Flash2, 128, false, 2048, 320},
    {"attn-153", AttentionImpl::Flash2, 128, false, 4096, 326},
    {"attn-154", AttentionImpl::Flash2, 128, false, 8192, 335},
    {"attn-155", AttentionImpl::Flash2, 128, false, 16384, 338},
    {"attn-162", AttentionImpl::Flash2, 64, true, 512, 141},
    {"attn-163", AttentionImpl::Flash2, 64, true, 1024, 192},
    {"attn-164", AttentionImpl::Flash2, 64, true, 2048, 232},
    {"attn-165", AttentionImpl::Flash2, 64, true, 4096, 257},
    {"attn-166", AttentionImpl::Flash2, 64, true, 8192, 273},
    {"attn-167", AttentionImpl::Flash2, 64, true, 16384, 284},
    {"attn-174", AttentionImpl::Flash2, 128, true, 512, 163},
    {"attn-175", AttentionImpl::Flash2, 128, true, 1024, 221},
    {"attn-176", AttentionImpl::Flash2, 128, true, 2048, 265},
    {"attn-177", AttentionImpl::Flash2, 128, true, 4096, 294},
    {"attn-178", AttentionImpl::Flash2, 128, true, 8192, 308},
    {"attn-179", AttentionImpl::Flash2, 128, true, 16384, 328},
    {"attn-132", AttentionImpl::SdpaMath, 64, false, 512, 62},
    {"attn-133", AttentionImpl::SdpaMath, 64, false, 1024, 72},
    {"attn-134", AttentionImpl::SdpaMath, 64, false, 2048, 81},
    {"attn-135", AttentionImpl::SdpaMath, 64, false, 4096, 86},
    {"attn-136", AttentionImpl::SdpaMath, 64, false, 8192, 87},
    {"attn-144", AttentionImpl::SdpaMath, 128, false, 512, 93},
    {"attn-145", AttentionImpl::SdpaMath, 128, false, 1024, 120},
    {"attn-146", AttentionImpl::SdpaMath, 128, false, 2048, 145},
    {"attn-147", AttentionImpl::SdpaMath, 128, false, 4096, 160},
    {"attn-148", AttentionImpl::SdpaMath, 128, false, 8192, 167},
    {"attn-156", AttentionImpl::SdpaMath, 64, true, 512, 26},
    {"attn-157", AttentionImpl::SdpaMath, 64, true, 1024, 29},
    {"attn-158", AttentionImpl::SdpaMath, 64, true, 2048, 31},
    {"attn-159", AttentionImpl::SdpaMath, 64, true, 4096, 32},
    {"attn-160", AttentionImpl::SdpaMath, 64, true, 8192, 32},
    {"attn-168", AttentionImpl::SdpaMath, 128, true, 512, 40},
    {"attn-169", AttentionImpl::SdpaMath, 128, true, 1024, 50},
    {"attn-170", AttentionImpl::SdpaMath, 128, true, 2048, 57},
    {"attn-171", AttentionImpl::SdpaMath, 128, true, 4096, 61},
    {"attn-172", AttentionImpl::SdpaMath, 128, true, 8192, 63},
};

// Forward + backward on the A100 80GB SXM4, the same sweep (batch x seq = 16k, hidden 2048): the
// FlashAttention-2 README's A100 figure (assets/flash2_a100_fwd_bwd_benchmark.png @4f285b3,
// attention.json source 2). FLOPs 3.5x forward. The standard attention's 16k bars ran out of memory.
constexpr Rate kA100ForwardBackward[] = {
    {"attn-186", AttentionImpl::Flash2, 64, false, 512, 132},
    {"attn-187", AttentionImpl::Flash2, 64, false, 1024, 153},
    {"attn-188", AttentionImpl::Flash2, 64, false, 2048, 162},
    {"attn-189", AttentionImpl::Flash2, 64, false, 4096, 171},
    {"attn-190", AttentionImpl::Flash2, 64, false, 8192, 175},
    {"attn-191", AttentionImpl::Flash2, 64, false, 16384, 176},
    {"attn-198", AttentionImpl::Flash2, 128, false, 1024, 173},
    {"attn-199", AttentionImpl::Flash2, 128, false, 2048, 187},
    {"attn-200", AttentionImpl::Flash2, 128, false, 4096, 196},
    {"attn-201", AttentionImpl::Flash2, 128, false, 8192, 201},
    {"attn-202", AttentionImpl::Flash2, 128, false, 16384, 203},
    {"attn-209", AttentionImpl::Flash2, 64, true, 512, 88},
    {"attn-210", AttentionImpl::Flash2, 64, true, 1024, 119},
    {"attn-211", AttentionImpl::Flash2, 64, true, 2048, 140},
    {"attn-212", AttentionImpl::Flash2, 64, true, 4096, 156},
    {"attn-213", AttentionImpl::Flash2, 64, true, 8192, 165},
    {"attn-214", AttentionImpl::Flash2, 64, true, 16384, 171},
    {"attn-221", AttentionImpl::Flash2, 128, true, 512, 99},
    {"attn-222", AttentionImpl::Flash2, 128, true, 1024, 133},
    {"attn-223", AttentionImpl::Flash2, 128, true, 2048, 155},
    {"attn-224", AttentionImpl::Flash2, 128, true, 4096, 173},
    {"attn-225", AttentionImpl::Flash2, 128, true, 8192, 182},
    {"attn-226", AttentionImpl::Flash2, 128, true, 16384, 189},
    {"attn-180", AttentionImpl::SdpaMath, 64, false, 512, 36},
    {"attn-181", AttentionImpl::SdpaMath, 64, false, 1024, 40},
    {"attn-182", AttentionImpl::SdpaMath, 64, false, 2048, 43},
    {"attn-183", AttentionImpl::SdpaMath, 64, false, 4096, 45},
    {"attn-184", AttentionImpl::SdpaMath, 64, false, 8192, 46},
    {"attn-192", AttentionImpl::SdpaMath, 128, false, 512, 53},
    {"attn-193", AttentionImpl::SdpaMath, 128, false, 1024, 67},
    {"attn-194", AttentionImpl::SdpaMath, 128, false, 2048, 76},
    {"attn-195", AttentionImpl::SdpaMath, 128, false, 4096, 79},
    {"attn-196", AttentionImpl::SdpaMath, 128, false, 8192, 86},
    {"attn-203", AttentionImpl::SdpaMath, 64, true, 512, 15},
    {"attn-204", AttentionImpl::SdpaMath, 64, true, 1024, 16},
    {"attn-205", AttentionImpl::SdpaMath, 64, true, 2048, 17},
    {"attn-206", AttentionImpl::SdpaMath, 64, true, 4096, 18},
    {"attn-207", AttentionImpl::SdpaMath, 64, true, 8192, 18},
    {"attn-215", AttentionImpl::SdpaMath, 128, true, 512, 23},
    {"attn-216", AttentionImpl::SdpaMath, 128, true, 1024, 28},
    {"attn-217", AttentionImpl::SdpaMath, 128, true, 2048, 32},
    {"attn-218", AttentionImpl::SdpaMath, 128, true, 4096, 32},
    {"attn-219", AttentionImpl::SdpaMath, 128, true, 8192, 34},
};

// PyTorch's SDPA flash backend (its vendored FlashAttention-2, pytorch_flash::flash_fwd_kernel and
// flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel) on an H200 SXM (132 SMs, the H100's 989.4 TFLOP/s
// dense 16-bit peak), PyTorch 2.11, bf16, timed by this project on the published sweep's grid
// (batch x seq = 16k, hidden 2,048, no dropout): docs/gpu_check/h200-2026-11-28/microbench.json,
// its "attention" rows with note "fa-grid" and backend "flash" (row index as id), spread under
// 1.5 % each. Same FLOP convention as above. 2-15 % below the flash-attn package's published
// H100 rates, most at short sequences and in the backward.
// Each row: forward, and forward + backward.
struct SdpaRate {
  static constexpr AttentionImpl impl = AttentionImpl::SdpaFlash;
  const char* id;
  int head_dim;
  bool causal;
  int seq;
  double forward, forward_backward;
};
constexpr SdpaRate kSdpa[] = {
    {"attention[15]", 64, false, 512, 265.0, 200.1},
    {"attention[16]", 64, false, 1024, 286.3, 241.0},
    {"attention[17]", 64, false, 2048, 296.4, 263.9},
    {"attention[18]", 64, false, 4096, 300.8, 276.9},
    {"attention[19]", 64, false, 8192, 303.9, 285.7},
    {"attention[20]", 64, false, 16384, 306.8, 290.8},
    {"attention[21]", 64, true, 512, 153.3, 124.0},
    {"attention[22]", 64, true, 1024, 215.2, 177.7},
    {"attention[23]", 64, true, 2048, 260.5, 218.9},
    {"attention[24]", 64, true, 4096, 278.7, 246.3},
    {"attention[25]", 64, true, 8192, 289.8, 262.9},
    {"attention[26]", 64, true, 16384, 295.8, 278.8},
    {"attention[27]", 128, false, 512, 304.5, 213.0},
    {"attention[28]", 128, false, 1024, 329.5, 256.7},
    {"attention[29]", 128, false, 2048, 344.8, 286.4},
    {"attention[30]", 128, false, 4096, 353.4, 300.6},
    {"attention[31]", 128, false, 8192, 351.7, 313.4},
    {"attention[32]", 128, false, 16384, 349.8, 318.3},
    {"attention[33]", 128, true, 512, 184.4, 143.1},
    {"attention[34]", 128, true, 1024, 249.6, 197.4},
    {"attention[35]", 128, true, 2048, 282.8, 241.3},
    {"attention[36]", 128, true, 4096, 302.9, 271.2},
    {"attention[37]", 128, true, 8192, 318.0, 288.2},
    {"attention[38]", 128, true, 16384, 316.9, 312.9},
};

// A table's rate (its `rate` column) for `impl` at this head dim, mask and length.
template <class Row, std::size_t N>
double rate_in(const Row (&table)[N], double Row::*rate, AttentionImpl impl, double head_dim, bool causal, double seq) {
  std::map<int, std::vector<std::pair<double, double>>> by_dim;
  for (const auto& r : table)
    if (r.impl == impl && r.causal == causal) by_dim[r.head_dim].emplace_back(r.seq, r.*rate);
  if (by_dim.empty()) return 0;
  std::vector<std::pair<double, double>> dims;  // (head dim, rate at this seq)
  for (auto& [d, pts] : by_dim) dims.emplace_back(d, log_interpolate(pts, seq));
  return log_interpolate(dims, head_dim);  // linear in log s and log d, flat beyond the points
}

// The backward's rate from the forward's and the pair's: t_bwd = 3.5/R_fwd+bwd - 1/R_fwd per
// forward FLOP, for 2.5 of them.
double backward_rate(double forward, double both) {
  const double per_flop = 3.5 / both - 1.0 / forward;
  return per_flop > 0 ? 2.5 / per_flop : both;
}

}  // namespace

double flash_forward_tflops(AttentionImpl impl, double head_dim, bool causal, double seq) {
  if (impl == AttentionImpl::SdpaFlash) return rate_in(kSdpa, &SdpaRate::forward, impl, head_dim, causal, seq);
  return rate_in(kForward, &Rate::tflops, impl, head_dim, causal, seq);
}

// Backward from forward and forward + backward: t_bwd = 3.5/R_fb − 1/R_fwd per forward FLOP, and
// it does 2.5 of them. Only FlashAttention-2 and standard attention have a published H100
// forward + backward table; FlashAttention-3's and cuDNN's backward are taken at FlashAttention-2's
// backward / forward ratio applied to their own forward (their only backward numbers,
// attention.json source 6, are a third-party transcription that does not state the mask).
double flash_backward_tflops(AttentionImpl impl, double head_dim, bool causal, double seq) {
  if (impl == AttentionImpl::SdpaFlash)  // its own forward and forward + backward, both measured
    return backward_rate(rate_in(kSdpa, &SdpaRate::forward, impl, head_dim, causal, seq),
                         rate_in(kSdpa, &SdpaRate::forward_backward, impl, head_dim, causal, seq));
  const AttentionImpl measured = impl == AttentionImpl::SdpaMath ? impl : AttentionImpl::Flash2;
  const double fwd = rate_in(kForward, &Rate::tflops, measured, head_dim, causal, seq);
  const double both = rate_in(kForwardBackward, &Rate::tflops, measured, std::min(head_dim, 128.0), causal, seq);
  return backward_rate(fwd, both) / fwd * flash_forward_tflops(impl, head_dim, causal, seq);
}

// Only FlashAttention-2 and the standard attention were published on both GPUs: FlashAttention-3 is
// Hopper-only, and cuDNN's A100 rates are not in the store; they take FlashAttention-2's ratio, as
// PyTorch's vendored FlashAttention-2 does (the same kernels).
double a100_over_h100(AttentionImpl impl, double head_dim, bool causal, double seq) {
  const AttentionImpl measured = impl == AttentionImpl::SdpaMath ? impl : AttentionImpl::Flash2;
  const double d = std::min(head_dim, 128.0);
  const double h100 = rate_in(kForwardBackward, &Rate::tflops, measured, d, causal, seq);
  const double a100 = rate_in(kA100ForwardBackward, &Rate::tflops, measured, d, causal, seq);
  return h100 > 0 ? a100 / h100 : 0.0;
}

// Dropout draws a Philox random number for each score and masks it, forward, and regenerates the
// same numbers backward. Measured by this project on an H200 (2026-11-28, scripts/gpu_microbench.py;
// docs/gpu_check/h200-2026-11-28/microbench.json): PyTorch 2.11's SDPA at GPT-2 XL's shape (8 x 25
// heads x 1024, head dim 64, causal: 104.9 M scores), dropout 0.1 against none. Flash: forward
// 0.1402 -> 0.1699 ms, backward 0.4549 -> 0.5041 ms; cuDNN: 0.0885 -> 0.1989 and 0.3133 -> 0.3513.
// FlashAttention-3 and the math path: not measured.
double flash_dropout_seconds_per_score(AttentionImpl impl, bool backward) {
  switch (impl) {
    case AttentionImpl::Flash2:
    case AttentionImpl::SdpaFlash: return backward ? 4.696e-13 : 2.831e-13;
    case AttentionImpl::Cudnn: return backward ? 3.718e-13 : 1.053e-12;
    default: return 0.0;
  }
}

}  // namespace dtsim::cost
