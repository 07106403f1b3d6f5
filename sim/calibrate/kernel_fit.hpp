#pragma once
// A device profile's kernel curves from microbenchmarks, as dtsim prices kernels
// (sim/cost/roofline.cpp): a GEMM of F FLOPs takes max((F + half)/(max·peak), bytes/memory rate,
// kernel_min); fused attention the same with its efficiency capped at attention.flash_efficiency.
// The compute term is linear in 1/max and half/max, so the fit is one closed-form least-squares
// solve over the rows it governs, repeated until the rows memory or the kernel floor price
// instead stop changing.
#include <string>
#include <vector>

#include "sim/calibrate/kernel_csv.hpp"
#include "sim/cost/roofline.hpp"

namespace dtsim::calibrate {

struct KernelRowFit {
  std::string file;
  int line = 0;
  std::string curve;  // gemm_efficiency, fp8_gemm_efficiency, attention.flash_efficiency
  double flops = 0, measured_s = 0, base_s = 0, fitted_s = 0;
  std::string bound;  // what prices it after the fit: compute, memory or kernel floor
  bool used = false;  // in the fit (compute-bound and governed by the curve)
};

// One curve of the profile before and after.
struct CurveFit {
  std::string key;  // gemm_efficiency, fp8_gemm_efficiency, attention.flash_efficiency
  double base_max = 0, base_half = 0, max = 0, half = 0;
  bool fitted = false;
  bool dropped_points = false;  // the base's measured points, which the fitted max and half replace
  int rows_used = 0;
  std::string note;
};

struct KernelFit {
  cost::DeviceProfile device;  // the base with the fitted curves
  std::vector<CurveFit> curves;
  std::vector<KernelRowFit> rows;
};

// GEMM rows fit gemm_efficiency (fp32, tf32, bf16, fp16 at their own peaks) and
// fp8_gemm_efficiency; attention rows, with those curves in place, attention.flash_efficiency.
// InputError naming the row of a dtype the device has no peak for or a kernel faster than its peak.
KernelFit fit_kernels(const cost::DeviceProfile& base, const std::vector<std::pair<std::string, std::vector<GemmRow>>>& gemm,
                      const std::vector<std::pair<std::string, std::vector<AttentionRow>>>& attention);

}  // namespace dtsim::calibrate
