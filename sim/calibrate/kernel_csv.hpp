#pragma once
// The microbenchmark CSVs `dtsim calibrate` reads (docs/calibrate.md):
//   GEMM:      m,n,k,dtype,time_us   (or tflops = 2·batch·m·n·k / time; optional batch)
//   attention: batch,heads,seq,head_dim,causal,time_us   (optional dtype, default bf16; kv_heads)
// dtype: fp32, tf32, bf16, fp16 or fp8. Blank lines and lines starting with "#" are skipped.
#include <string>
#include <vector>

#include "models/model_graph.hpp"

namespace dtsim::calibrate {

struct GemmRow {
  int line = 0;
  double batch = 1, m = 0, n = 0, k = 0;
  std::string dtype;
  double time_s = 0;
  // The GEMM as dtsim's models build one (models/transformer_ops.cpp gemm, fp8_linear's FP8 GEMM).
  models::Kernel kernel() const;
};

struct AttentionRow {
  int line = 0;
  double batch = 1, heads = 0, kv_heads = 0, seq = 0, head_dim = 0;
  bool causal = false;
  std::string dtype = "bf16";
  double time_s = 0;
  // The fused attention forward as dtsim's transformer builds it (models/transformer.cpp): FLOPs
  // 4·b·h·s²·d, the causal mask not subtracted; bytes Q, O, K and V.
  models::Kernel kernel() const;
};

// InputError naming the file, the line and the column for a missing column, an unknown one, a
// cell that is not a positive number, or an unknown dtype (with the nearest).
std::vector<GemmRow> read_gemm_csv(const std::string& path);
std::vector<AttentionRow> read_attention_csv(const std::string& path);

// The dtype whose peak prices a row: the row's own, but "bf16" for FP8 GEMMs, whose kernel is
// flagged fp8 (roofline.cpp then takes the fp8 peak and curve).
std::string peak_dtype(const std::string& dtype);

}  // namespace dtsim::calibrate
