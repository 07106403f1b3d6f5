#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/model_graph.hpp"
#include "sim/cost/kernel_table.hpp"
#include "sim/profile/timing_stats.hpp"

// Times real kernels on this CPU with Eigen (fp32), compiled for this CPU's ISA in the
// libdtsim_cpu.so plugin. Measurements happen here and in `dtsim profile` only, never inside `run`.
namespace dtsim::profile {

struct Options {
  int warmup = 2;
  int repeats = 5;               // the fewest samples per kernel; more until the spread is small
  double target_spread = 0.05;   // relative (1.4826 MAD / median)
  double budget_s = 1.0;         // sampling time per kernel before giving up on the target
  // Bytes written before each sample (Protocol::evict_bytes): with more than the last-level
  // cache, kernels are timed cold, as a step whose working set exceeds the cache runs them.
  double evict_bytes = 0;
};

// The last-level cache of CPU 0 in bytes (sysfs), 0 when unknown.
double last_level_cache_bytes();

Protocol protocol(const Options& o);

// Seconds of C[m,n] = A[m,k] B[k,n], `batch` times. Batches larger than 4 are timed on 4 and
// scaled: the products are independent and the same size.
Timing time_gemm(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t k, const Options& o);
// Seconds of an element-wise kernel over `bytes`: "stream" (y = a x + y, 12 bytes per element),
// "gelu", "softmax", "layernorm", "dropout" (8 bytes per element: read x, write y).
Timing time_elementwise(const std::string& kind, double bytes, const Options& o);
// A near-empty op through a framework-like dispatch (registry lookup, output allocation, call):
// the per-kernel overhead beyond the kernels' own times.
Timing time_launch(const Options& o);
// An empty OpenMP region over the threads: the fork and join inside every parallel kernel's time.
Timing time_fork_join(const Options& o);
// Seconds of a convolution pass as the im2col formulation runs it (models::conv_kernel), in the
// plugin ("conv_fwd", "conv_dgrad", "conv_wgrad"): forward gathers the input into columns and
// multiplies by the filters, dgrad multiplies the output gradient by the filters and scatters
// the columns back (col2im), wgrad gathers the input and multiplies by the output gradient.
// Groups beyond 4 are timed on 4 and scaled.
Timing time_conv(const models::ConvShape& c, models::ConvPass pass, const Options& o);
// The forward convolution itself, NCHW input, KCRS filters (C per group), NKPQ output: the
// computation time_conv times (run by the plugin), exposed so a test can check it against the
// definition.
std::vector<float> conv2d(const std::vector<float>& x, const std::vector<float>& w, const models::ConvShape& c);

// Every distinct GEMM shape, convolution (by implicit-GEMM shape, timed as its pass) and
// element-wise size among `kernels` (element-wise kernels with transcendentals, reductions or
// random numbers as their own kinds), plus square GEMMs from 64 to 1024 and sweeps of each
// element-wise kind, which give the curves unlisted kernels are interpolated on, and the launch
// overhead. The provenance records the machine, the ISA and the
// load; a noisy table is marked (KernelTable::noisy) with the reasons in provenance/timing.
cost::KernelTable profile_cpu(const std::vector<models::Kernel>& kernels, const Options& o);

// The CPU, its clock, the kernels' ISA, threads, Eigen and compiler; throws when the plugin is
// unavailable.
nlohmann::json cpu_provenance();

}  // namespace dtsim::profile
