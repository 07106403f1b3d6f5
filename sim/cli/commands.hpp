#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dtsim::cli {

struct RunOptions {
  std::string scenario, out_dir, format = "text";
  bool trace = false, html = false;
  bool require_fit = false;  // exit 3 when the plan does not fit in the GPUs' memory
  bool kernels = false;      // text: also the kernel time by role (reports::kernel_table)
};

struct CompareOptions {
  std::string baseline, candidate;
  double rel_tol = -1;                  // -1: not given, each metric its default (reports::known_metrics)
  std::vector<std::string> metrics;     // "step_time_s=0.02": one metric's tolerance
  std::string format = "text";          // text, json or junit
  bool strict = false;  // results of different scenarios: an input error rather than a warning
  std::string html;     // also write the two side by side as a page here
};

struct ValidateOptions {
  std::string directory, suite, json_out;  // suite: searched in sub-folders, summarised by group
  int jobs = 0;
  double max_mean_error = -1, max_error = -1;  // percent; exceeded -> exit 3
  bool strict = false;                         // a row outside its tolerance -> exit 3
};

struct CollectiveOptions {
  // An empty algorithm is the operation's usual one: direct for all_to_all (every rank sends to
  // every other at once, as NCCL's all-to-all does), ring for the rest.
  std::string op = "all_reduce", algorithm, scenario, format = "text";
  std::string min_bytes = "8", max_bytes = "128M";
  double factor = 2;
  int gpus = 0, gpus_per_node = 8;  // gpus 0: the scenario's cluster, else 8
  bool analytical = false;
};

struct ProfileOptions {
  std::string device = "cpu", model, scenario, out = "kernel_table.json";
  std::string dtype;  // default: fp32 on the CPU, bf16 on a GPU
  std::int64_t micro_batch = 0;  // 0: the scenario's, or 1
  int repeats = 5;
};

struct SweepOptions {
  std::string scenario, format = "text";
  std::string gpus, devices;  // comma-separated lists; empty: the scenario's
  std::string rank_by = "time", write_best;
  bool progress = false;      // progress and ETA on stderr even when it is not a terminal
  int jobs = 0, top = 15;
  // Strategies are ranked by the closed form (sim/results/closed_form.hpp); the best `confirm`
  // are then replayed. `exact`: replay every one, as before the closed form.
  int confirm = 5;
  bool exact = false;
  std::string precisions;  // comma-separated: bf16,fp8; empty: the scenario's
  // The planner's answer (docs/sweeps.md): the best `per_cluster` of each cluster, within limits
  // (0: none) on the days and cost to train and on the memory left free per GPU (GiB).
  bool by_cluster = false;
  int per_cluster = 1;
  double max_days = 0, max_cost = 0, min_headroom = 0;
  // "K/N": price shard K of N and write its part file (to `part_out`, else stdout) for `merge`.
  std::string shard, part_out;
};

// `dtsim merge PART...`: the parts of a sharded sweep joined, printed as the whole sweep would be.
struct MergeOptions {
  std::vector<std::string> parts;
  std::string format = "text", write_best;
  int top = 15, per_cluster = 1;
};

// Each returns the process exit code (SPEC.md): 0 ok, 1 runtime failure, 2 bad input, 3 regression.
int run(const RunOptions& o);
int memory(const std::string& scenario, const std::string& format);
int list(const std::string& what, bool files = false);
int compare(const CompareOptions& o);
// Published measurements (scenarios with a "reference") against predictions.
int validate(const ValidateOptions& o);
// An nccl-tests style table from the network model.
int collective(const CollectiveOptions& o);
// Times the kernels a model needs on this machine and writes a kernel table.
int profile(const ProfileOptions& o);
// Enumerates parallel strategies for the scenario's model and cluster and ranks them.
int sweep(const SweepOptions& o);
int merge(const MergeOptions& o);

}  // namespace dtsim::cli
