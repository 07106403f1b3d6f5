// `collective --format nccl-tests`: the table nccl-tests' *_perf binaries print (src/common.cu's
// Reporter and run()), line for line, so scripts written for their output read dtsim's.
#include "sim/cli/collective_nccl.hpp"

#include <fmt/printf.h>

#include <cmath>

namespace dtsim::cli {

namespace {
using taskgraph::CollectiveOp;

// The reduction and root nccl-tests prints for each operation (its *.cu runTest): no reduction
// ("none") and no root (-1) where the operation has none; its default root is rank 0.
const char* redop(CollectiveOp op) {
  return op == CollectiveOp::AllReduce || op == CollectiveOp::ReduceScatter || op == CollectiveOp::Reduce ? "sum" : "none";
}
int root(CollectiveOp op) { return op == CollectiveOp::Broadcast || op == CollectiveOp::Reduce ? 0 : -1; }

// Elements per rank's call: the per-rank share where each rank sends or receives 1/p of the size.
long count(CollectiveOp op, double size, int gpus) {
  const long elements = static_cast<long>(size / 4);  // float
  const bool shared = op == CollectiveOp::AllGather || op == CollectiveOp::ReduceScatter || op == CollectiveOp::AllToAll;
  return shared ? elements / gpus : elements;
}

// nccl-tests' time column: fewer decimals as the time grows, seven wide.
std::string time_text(double us) {
  if (us >= 10000.0) return fmt::sprintf("%7.0f", us);
  if (us >= 100.0) return fmt::sprintf("%7.1f", us);
  return fmt::sprintf("%7.2f", us);
}

std::string step_text(double factor) {
  return factor == std::floor(factor) ? fmt::sprintf("%.0f", factor) : fmt::sprintf("%g", factor);
}
}  // namespace

// A simulation has no buffers to check: validation 0, and no wrong elements (0, which scripts
// read as a clean run, where nccl-tests' -c 0 prints -1).
std::string nccl_tests_table(const NcclTable& t) {
  std::string out = fmt::sprintf(
      "# nThread 1 nGpus %d minBytes %.0f maxBytes %.0f step: %s(factor) warmup iters: 0 iters: 1 agg iters: 1 validation: 0 graph: 0\n",
      t.gpus, t.min_bytes, t.max_bytes, step_text(t.factor));
  out += "#\n# Using devices\n";
  // One host name per node, as ranks on different machines print theirs: `dtsim calibrate` reads
  // the nodes from them.
  for (int r = 0; r < t.gpus; ++r)
    out += fmt::sprintf("#  Rank %2d Group %2d Pid %6d on %10s device %2d [0x%02x] %s\n", r, 0, 0,
                        fmt::sprintf("dtsim-%d", r / t.gpus_per_node), r % t.gpus_per_node, 0, t.device);
  out += "#\n";
  out += fmt::sprintf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "", "", "", "", "");
  out += fmt::sprintf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size", "count", "type", "redop", "root",
                      "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  out += fmt::sprintf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)", "(elements)", "", "", "", "(us)",
                      "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  double busbw_sum = 0;
  for (const auto& r : t.rows) {
    out += fmt::sprintf("%12li  %12li  %8s  %6s  %6i", static_cast<long>(r.size), count(t.op, r.size, t.gpus), "float", redop(t.op),
                        root(t.op));
    // The model has one time per size; in place it moves the same bytes over the same links.
    for (int place = 0; place < 2; ++place) {
      out += fmt::sprintf("  %7s  %6.2f  %6.2f  %5li", time_text(r.time_us), static_cast<float>(r.algbw), static_cast<float>(r.busbw), 0L);
      busbw_sum += static_cast<float>(r.busbw);
    }
    out += "\n";
  }
  const double avg = t.rows.empty() ? 0 : busbw_sum / (2.0 * t.rows.size());
  out += "# Out of bounds values : 0 OK\n";
  out += fmt::sprintf("# Avg bus bandwidth    : %g \n", avg);
  return out + "#\n\n";
}

}  // namespace dtsim::cli
