#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "models/model_graph.hpp"
#include "sim/cost/kernel_table.hpp"
#include "sim/cost/stack.hpp"
#include "sim/taskgraph/task_graph.hpp"

namespace dtsim::cost {

// Fraction of a peak reached by a kernel of size x (FLOPs or bytes): max * x / (x + half).
// Equivalently time = x / (max * peak) + half / (max * peak): a fixed ramp-up cost (launch, wave
// quantisation, pipeline fill) plus the streaming rate, which is how small GEMMs behave.
// When measured points are given, efficiency follows them instead (linear in log x between
// points, flat beyond the largest): a two-parameter curve cannot follow a measured dip, and
// the sizes training uses often sit in one.
struct EfficiencyCurve {
  double max = 1.0;
  double half = 0.0;
  std::vector<std::pair<double, double>> points;  // (size, efficiency), sizes increasing
  double at(double x) const;
};

// Whether a GEMM's rate depends on the alignment of its leading dimensions (gemm_alignment.cpp):
// none, the device's compiler pads to its tiles or its kernels do not care (TPU/XLA, CPUs); cublas,
// NVIDIA's tensor-core libraries, whose fast kernels need 16-byte aligned rows.
enum class GemmAlignment { None, Cublas };
// Which GPU's published fused-attention tables a stack's attention kernels are priced from
// (sim/cost/attention_rates.cpp): H100 SXM5's, scaled by the device's matrix peak, or A100 SXM4's.
enum class AttentionTables { H100, A100 };

// Bytes per second of ATen's four training-mode batch norm kernels (channels-last): the forward's
// statistics (reads x) and transform (reads x, writes y), the backward's reduction (reads x and
// dy) and input gradient (reads x and dy, writes dx).
struct BatchNormRates {
  double statistics = 0, transform = 0, backward_reduce = 0, backward_input = 0;
};

struct DeviceProfile {
  std::string name, description, file;
  std::map<std::string, double> peak_flops;  // FLOP/s by dtype: fp64, fp32, tf32, bf16, fp16, fp8, fp4
  double memory_bytes = 0;
  double hbm_bandwidth = 0;  // bytes/s
  EfficiencyCurve gemm, memory;
  // Convolutions priced as their implicit GEMM; without a curve of their own, at GEMM efficiency.
  std::optional<EfficiencyCurve> conv;
  double kernel_min_s = 0;
  // Materialised attention: the fraction of the memory roofline that kernels streaming the score
  // matrix reach. Fused (flash) attention: the fraction of the matrix peak its kernels reach.
  double scores_memory_efficiency = 1.0;
  double flash_attention_efficiency = 1.0;
  double pcie_bandwidth = 0;  // bytes/s per direction
  double power_w = 0;                 // board power (TDP), for a capacity plan's energy; 0: unknown
  double price_per_gpu_hour_usd = 0;  // on-demand rental, for a capacity plan's cost; 0: unknown
  std::optional<KernelTable> kernels;  // measured on this device, when it has been profiled
  // Added to every kernel: a framework's dispatch, or a GPU's launch latency. The profile's key
  // `launch_overhead_us` when set, else the measured table's, else 0.
  std::optional<double> launch_overhead_s;
  // A CPU device's collectives progress on its own cores (reductions, the network stack): the
  // share of the cores they hold while any collective of the device is in flight, which compute
  // overlapping it loses. 0 for accelerators, whose communication has engines of its own.
  double comm_core_share = 0;
  // Streaming multiprocessors, and how many of them a NCCL collective's kernels hold on this
  // platform by default (one CTA per channel; comm_interference.cpp). 0: not stated.
  int sm_count = 0, nccl_sms = 0;
  // Eager PyTorch's channels-last batch norm kernels, measured on this device (bytes/s each moves:
  // sim/cost/batch_norm_kernels.hpp); absent, batch norm streams at the memory-bound rate.
  std::optional<BatchNormRates> eager_batch_norm;
  // Bytes/s (read + written) a copy into a wider type moves (KernelRole::CastUp; PyTorch's bf16 to
  // fp32 casts run well below the streaming rate). 0: such copies stream like any other.
  double cast_up_bandwidth = 0;
  // FP8 GEMMs (Transformer Engine): their efficiency curve; absent, the 16-bit GEMM curve.
  std::optional<EfficiencyCurve> fp8_gemm;
  // Block-scaled FP8 GEMMs (Kernel::fp8_block: a scale per 1 x 128 tile and 128 x 128 block,
  // applied as the kernel accumulates): their curve by FLOPs, times K / (K + fp8_block_k_overhead)
  // for each output tile's fixed work (loading its scales, the promoting epilogue) beside its loop
  // over K. Absent, the FP8 curve.
  std::optional<EfficiencyCurve> fp8_block_gemm;
  double fp8_block_k_overhead = 0;
  GemmAlignment gemm_alignment = GemmAlignment::None;
  AttentionTables attention_tables = AttentionTables::H100;
  // A 16-bit GEMM tile's fixed work beside its main loop over K (filling the load pipeline, the
  // epilogue), in elements of K, and the K of the shape the GEMM curve's max was measured at (its
  // `gemm_k_loop` key; sim/cost/gemm_alignment.hpp, gemm_depth_rate). 0: not modelled.
  double gemm_k_overhead = 0, gemm_k_reference = 0;
  // The software stack the scenario runs (its `stack` key): how it launches and which kernels.
  Stack stack;
};

// The per-kernel overhead `d` prices in `dtype` (see DeviceProfile::launch_overhead_s).
double launch_overhead(const DeviceProfile& d, const std::string& dtype);

// Seconds for one kernel: the slower of its compute and its memory traffic, never below the
// device's minimum kernel time. `dtype` selects the matrix peak used by GEMMs; `rate` scales the
// efficiency a GEMM reaches (an unaligned GEMM's share of the fast kernels' rate).
double kernel_time(const DeviceProfile& d, const models::Kernel& k, const std::string& dtype, double rate = 1.0);

// A kernel priced from the device's measured table when it covers it, else by the roofline; plus
// the launch overhead.
std::pair<double, PriceSource> price_kernel(const DeviceProfile& d, const models::Kernel& k, const std::string& dtype);

// The same, with the relative spread of the measurement behind it (0 for the roofline).
struct KernelPrice {
  double seconds = 0;
  PriceSource source = PriceSource::Roofline;
  double spread = 0;
};
KernelPrice quote_kernel(const DeviceProfile& d, const models::Kernel& k, const std::string& dtype);
// The kernel alone as the device prices it, and as the device's stack runs it (sim/cost/stack.cpp).
KernelPrice quote_unstacked(const DeviceProfile& d, const models::Kernel& k, const std::string& dtype);
KernelPrice quote_stacked(const DeviceProfile& d, const models::Kernel& k, const std::string& dtype);

// Seconds for each Work of the graph (a sum over its kernels), in the graph's work order, how
// much of each came from measurements, and the measured seconds' spread (sum of seconds x
// relative spread: a busy machine slows every kernel together, so spreads add, not in quadrature).
struct Priced {
  std::vector<double> seconds, measured_seconds, spread_seconds;
};
Priced price_works(const taskgraph::TaskGraph& g, const DeviceProfile& d, const std::string& dtype);

}  // namespace dtsim::cost
