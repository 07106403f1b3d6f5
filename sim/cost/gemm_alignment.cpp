#include "sim/cost/gemm_alignment.hpp"

#include <algorithm>

namespace dtsim::cost {

namespace {

// The fast tensor-core kernels load 16-byte vectors, so they need every row to start on a 16-byte
// boundary: 8 elements of a 16-bit type, 4 of fp32, 16 of fp8 (the same figure Inductor pads to:
// pad_mm.py get_alignment_size_dtype, 8 for fp16/bf16, 4 for fp32; pytorch/pytorch @017943b).
constexpr int kAlignedBytes = 16;

int elem_bytes_of(const std::string& dtype, bool fp8) {
  if (fp8 || dtype == "fp8") return 1;
  if (dtype == "bf16" || dtype == "fp16") return 2;
  if (dtype == "fp64") return 8;
  return 4;  // fp32, tf32
}

std::int64_t power_of_two_dividing(std::int64_t x) { return x <= 0 ? kAlignedBytes : x & -x; }

// A dimension of 1 is squeezed away, not padded (pad_mm.py get_padded_length).
std::int64_t pad(std::int64_t x, std::int64_t to) { return x == 1 ? 1 : (x + to - 1) / to * to; }

// The alignment the kernel reaches cuBLAS with, kAlignedBytes where its shape changes nothing (the
// curve's stacks, devices that do not care, non-GEMMs, aligned GEMMs): every kernel of a stacked
// step asks, so this decides before anything is copied.
int reaching_alignment(GemmShapes shapes, GemmAlignment device, const models::Kernel& k, const std::string& dtype) {
  if (shapes == GemmShapes::Curve || device != GemmAlignment::Cublas || k.kind != models::KernelKind::Gemm) return kAlignedBytes;
  const auto [a, b] = leading_dims(k);
  return leading_alignment_bytes(a, b, elem_bytes_of(dtype, k.fp8));
}

}  // namespace

int leading_alignment_bytes(std::int64_t a, std::int64_t b, int elem_bytes) {
  const std::int64_t bytes = std::min(power_of_two_dividing(a), power_of_two_dividing(b)) * elem_bytes;
  return static_cast<int>(std::min<std::int64_t>(bytes, kAlignedBytes));
}

std::pair<std::int64_t, std::int64_t> leading_dims(const models::Kernel& k) {
  const bool wgrad = k.role == models::KernelRole::WeightGrad || k.role == models::KernelRole::BiasWeightGrad;
  return wgrad ? std::pair{k.m, k.n} : std::pair{k.n, k.k};
}

// Measured rates, each as a share of the aligned rate dtsim's curve prices:
// - 2 bytes (one 16-bit element): 0.165, GPT-2 XL's output layer on dtsim's own H100 run
//   (hardware_profiles/kernel_tables/nvidia-h100-80gb-hbm3-gpt2-xl-1gpu-bf16.json, `dtsim profile
//   --device cuda`, cuBLAS 13.1): 1600x50257x8192, 8192x1600x50257 and 8192x50257x1600 in bf16
//   ran at 0.167, 0.164 and 0.165 of the curve (130-132 TFLOP/s, sm75 CUTLASS align1 kernels).
// - 4 bytes (two elements): 0.685, /work/shared/calibration/microbench/gemm.json gemm-021 over
//   gemm-022 (H100, fp16 bmm 4 x 4096x4096xK: K = 10922 = 2 x 5461, 272.73 TFLOP/s; K = 10944,
//   398.38; stas00/ml-engineering @c620888 swiglu-maf-bench.py). gemm-023..026 (K = 10848, 10880,
//   10912, 11008: 32-, 128-, 32- and 256-element aligned) all ran at 395.0-395.6: past 16 bytes
//   alignment does not matter.
// - 8 bytes (four elements): not measured; the nearer slower level, 4 bytes', conservatively.
// A single byte (fp8 with an odd dimension) is not measured either: the 2-byte level.
double cublas_alignment_rate(int alignment_bytes) {
  if (alignment_bytes >= kAlignedBytes) return 1.0;
  if (alignment_bytes >= 4) return 0.685;
  return 0.165;
}

double gemm_depth_rate(const DeviceProfile& d, std::int64_t k, double flops) {
  if (d.gemm_k_overhead <= 0 || k <= 0 || flops <= 0) return 1.0;
  const double o = d.gemm_k_overhead, r = d.gemm_k_reference, K = static_cast<double>(k);
  const double depth = std::min(1.0, (K / (K + o)) / (r / (r + o)));
  if (!d.gemm.points.empty()) return depth;  // measured points: no separate start-up to keep
  return (flops + d.gemm.half) / (flops / depth + d.gemm.half);
}

GemmRun run_gemm(GemmShapes shapes, GemmAlignment device, const models::Kernel& k, const std::string& dtype) {
  const int align = reaching_alignment(shapes, device, k, dtype);
  if (align >= kAlignedBytes) return {k, 1.0};
  if (shapes == GemmShapes::AsWritten) return {k, cublas_alignment_rate(align)};
  // Inductor's pad_mm pads m, n and k up to the alignment with zeros and slices the result
  // (pad_mm.py get_padded_length, pad_mat1/pad_mat2): the padded GEMM's FLOPs on the fast kernels.
  // The zero-padded copies of the operands are not priced (see docs/stacks.md).
  const std::int64_t to = kAlignedBytes / elem_bytes_of(dtype, k.fp8);
  models::Kernel padded = k;
  padded.m = pad(k.m, to);
  padded.n = pad(k.n, to);
  padded.k = pad(k.k, to);
  padded.flops = k.flops * (static_cast<double>(padded.m) / k.m) * (static_cast<double>(padded.n) / k.n) *
                 (static_cast<double>(padded.k) / k.k);
  return {padded, 1.0};
}

KernelPrice quote_gemm(const DeviceProfile& d, const models::Kernel& k, const std::string& dtype) {
  // An aligned GEMM runs as written (not copied: every GEMM of a stacked step asks).
  const bool aligned = reaching_alignment(d.stack.gemm_shapes, d.gemm_alignment, k, dtype) >= kAlignedBytes;
  const GemmRun run = aligned ? GemmRun{} : run_gemm(d.stack.gemm_shapes, d.gemm_alignment, k, dtype);
  const models::Kernel& g = aligned ? k : run.kernel;
  const double rate = aligned ? 1.0 : run.rate;
  // The K-loop counts where the stack hands cuBLAS the model's own shapes (not the curve's stacks)
  // and the GEMM runs on the fast 16-bit kernels of the curve the reference depth belongs to. The
  // unaligned kernels' measured rates hold their own K-loop: GPT-2 XL's output layer ran at
  // 0.164-0.167 of the curve at K = 1,600, 8,192 and 50,257 alike.
  const bool shaped = d.stack.gemm_shapes != GemmShapes::Curve && g.kind == models::KernelKind::Gemm && !g.fp8;
  const double depth = shaped && rate == 1.0 ? gemm_depth_rate(d, g.k, g.flops) : 1.0;
  const KernelPrice q = quote_unstacked(d, g, dtype);
  if (q.source == PriceSource::Exact || rate * depth == 1.0) return q;
  const double overhead = launch_overhead(d, dtype);
  // Interpolated between measured shapes: the table's rate at that size, for aligned kernels; the
  // measured shapes around it hold their own K-loops.
  if (q.source == PriceSource::Interpolated) {
    if (rate == 1.0) return q;
    return {(q.seconds - overhead) / rate + overhead, q.source, q.spread};
  }
  return {kernel_time(d, g, dtype, rate * depth) + overhead, PriceSource::Roofline, 0.0};
}

}  // namespace dtsim::cost
