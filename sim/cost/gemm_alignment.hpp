#pragma once
// GEMMs whose leading dimensions are not a multiple of 16 bytes (issue 30): cuBLAS runs them on
// slower kernels, and the stack decides whether they reach it unpadded (stack.gemm_shapes).
#include <cstdint>
#include <string>

#include "models/model_graph.hpp"
#include "sim/cost/roofline.hpp"

namespace dtsim::cost {

// The largest power of two, in bytes and at most 16, dividing every leading dimension of a
// row-major GEMM C[m,n] = A[m,k] B[k,n]: k (A's rows) and n (B's and C's rows).
int leading_alignment_bytes(std::int64_t n, std::int64_t k, int elem_bytes);

// cuBLAS's rate at that alignment as a share of the aligned (16-byte) rate.
double cublas_alignment_rate(int alignment_bytes);

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
