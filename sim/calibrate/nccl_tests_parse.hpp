#pragma once
// nccl-tests' stdout (NVIDIA/nccl-tests, src/util.cu at v2.19.6, commit a0b82b2; src/common.cu
// in versions before the JSON report moved it there: writeDeviceReport prints the
// "# nThread" line and one "#  Rank  r Group g Pid p on HOST device d [bus] NAME" line per rank,
// writeResultHeader the column names, writeBenchmarkLinePreamble/Body each row: size, count, type,
// redop, root, then time, algbw, busbw, #wrong out of place and again in place; writeResultFooter
// "# Avg bus bandwidth"). Older versions lack "Group", "root" or call "#wrong" "error"; the
// columns are found by the names of the header line, so every layout reads alike.
#include <optional>
#include <string>
#include <vector>

#include "sim/taskgraph/task_graph.hpp"

namespace dtsim::calibrate {

struct NcclTestsRow {
  int line = 0;
  double size = 0;        // bytes: nccl-tests' S, the whole buffer
  double time_us = 0;     // the mean of the out-of-place and in-place times
  double algbw = 0, busbw = 0;  // GB/s, out of place, as printed
};

struct NcclTestsFile {
  std::string path;
  std::string test;  // all_reduce_perf, ...
  taskgraph::CollectiveOp op = taskgraph::CollectiveOp::AllReduce;
  std::string op_from;  // how the operation was told: "its header", "its name", "OP= before it"
  std::vector<std::string> host_of_rank;  // by rank
  std::vector<NcclTestsRow> rows;         // sizes above zero
  int zero_rows = 0;                      // rows of 0 bytes (launch cost alone), not fitted
  std::optional<double> avg_busbw;        // the "# Avg bus bandwidth" line
  int ranks() const { return static_cast<int>(host_of_rank.size()); }
};

// The tests calibrate reads, their operation, and the names a user may write before "=".
struct NcclTest {
  const char* binary;  // "all_reduce_perf"
  taskgraph::CollectiveOp op;
};
const std::vector<NcclTest>& nccl_tests();

// `spec` is FILE or OP=FILE (OP a test's name, with or without "_perf"). InputError, naming the
// file and line, for a layout it cannot read, a table without rank lines or rows, or a
// bus/algorithm bandwidth ratio that is not the operation's.
NcclTestsFile parse_nccl_tests(const std::string& spec);

}  // namespace dtsim::calibrate
