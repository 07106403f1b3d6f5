#pragma once
// GEMMs whose leading dimensions are not a multiple of 16 bytes (issue 30): cuBLAS runs them on
// slower kernels, and the stack decides whether they reach it unpadded (stack.gemm_shapes).
#include <cstdint>
#include <string>
#include <utility>

#include "models/model_graph.hpp"
#include "sim/cost/roofline.hpp"

namespace dtsim::cost {

// The largest power of two, in bytes and at most 16, dividing both leading dimensions (the rows'
// lengths in memory) of a GEMM.
int leading_alignment_bytes(std::int64_t a, std::int64_t b, int elem_bytes);

// Which dimensions are rows in memory. A row-major C[m,n] = A[m,k] B[k,n] has rows of k (A) and n
// (B, C): a linear layer's forward (tokens x out x in) and input gradient (tokens x in x out). Its
// weight gradient, in x out x tokens, multiplies X^T by dY as they lie, [tokens, in] and
// [tokens, out]: rows of m and n; the token count is never a row length.
std::pair<std::int64_t, std::int64_t> leading_dims(const models::Kernel& k);

// cuBLAS's rate at that alignment as a share of the aligned (16-byte) rate.
double cublas_alignment_rate(int alignment_bytes);

// The share of the device's curve a 16-bit GEMM of `flops` and depth k reaches for its K-loop:
// each output tile runs its main loop over k plus a fixed fill and epilogue worth
// `gemm_k_overhead` elements of K, so its streaming part runs at depth = (k / (k + o)) /
// (r / (r + o)) of the curve's rate, whose max was measured at depth r (`gemm_k_reference`), at
// most 1. The curve's fixed start-up (half_flops) does not loop over K: the share is
// (f + half) / (f / depth + half). 1 where the device states no overhead.
double gemm_depth_rate(const DeviceProfile& d, std::int64_t k, double flops);

// A GEMM as the stack runs it: its kernel (Inductor's padded shape and FLOPs) and the share of
// the device's curve it reaches.
struct GemmRun {
  models::Kernel kernel;
  double rate = 1.0;
};
GemmRun run_gemm(GemmShapes shapes, GemmAlignment device, const models::Kernel& k, const std::string& dtype);

// The kernel priced as run_gemm runs it: a measured table's time when the table covers the shape
// it runs (the measurement already holds the alignment), else the roofline at the run's rate.
KernelPrice quote_gemm(const DeviceProfile& d, const models::Kernel& k, const std::string& dtype);

}  // namespace dtsim::cost
