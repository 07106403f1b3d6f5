#pragma once
#include <vector>

#include <nlohmann/json.hpp>

#include "models/model_graph.hpp"
#include "sim/cost/kernel_table.hpp"

// Times real kernels on this CPU with Eigen (fp32). Measurements happen here and in
// `dtsim profile` only, never inside `run`.
namespace dtsim::profile {

struct Options {
  int warmup = 1;
  int repeats = 5;  // the median is kept
};

// Median seconds of C[m,n] = A[m,k] B[k,n], `batch` times. Batches larger than 4 are timed on 4
// and scaled: the products are independent and the same size.
double time_gemm(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k, const Options& o);
// Median seconds of a streaming kernel moving `bytes` (y = a x + y: 12 bytes per element).
double time_stream(double bytes, const Options& o);

// A convolution pass as the im2col formulation runs it (models::conv_kernel): forward gathers
// the input into columns and multiplies by the filters, dgrad multiplies the output gradient by
// the filters and scatters the columns back (col2im), wgrad gathers the input and multiplies by
// the output gradient. Groups beyond 4 are timed on 4 and scaled.
double time_conv(const models::ConvShape& c, models::ConvPass pass, const Options& o);
// The forward convolution itself, NCHW input, KCRS filters (C per group), NKPQ output: the
// computation time_conv times, exposed so a test can check it against the definition.
std::vector<float> conv2d(const std::vector<float>& x, const std::vector<float>& w, const models::ConvShape& c);

// Every distinct GEMM shape, convolution and memory size among `kernels`, plus square GEMMs from
// 64 to 1024 and streams from 64 KiB to 256 MiB, which give the curves unlisted kernels are
// interpolated on.
cost::KernelTable profile_cpu(const std::vector<models::Kernel>& kernels, const Options& o);

nlohmann::json cpu_provenance();

}  // namespace dtsim::profile
