#pragma once
#include <string>
#include <vector>

#include "sim/taskgraph/task_graph.hpp"

namespace dtsim::cli {

struct NcclRow {
  double size = 0, time_us = 0, algbw = 0, busbw = 0;  // bytes, microseconds, GB/s
};
struct NcclTable {
  taskgraph::CollectiveOp op = taskgraph::CollectiveOp::AllReduce;
  int gpus = 1, gpus_per_node = 1;
  double min_bytes = 0, max_bytes = 0, factor = 2;
  std::string device = "simulated GPU";
  std::vector<NcclRow> rows;
};

// The whole of an nccl-tests run's stdout for these rows: its "#" header, the table with its
// out-of-place and in-place columns, and the "# Avg bus bandwidth" trailer.
std::string nccl_tests_table(const NcclTable& t);

}  // namespace dtsim::cli
