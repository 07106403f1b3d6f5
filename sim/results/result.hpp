#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/config/scenario.hpp"
#include "sim/replay/replay.hpp"
#include "strategies/plan.hpp"
#include "sim/faults/faults.hpp"
#include "sim/results/steps.hpp"
#include "sim/results/capacity.hpp"
#include "sim/results/ranges.hpp"

#include <map>
#include <optional>

namespace dtsim::results {

// The chief's checkpoints and the evaluator's reads of them (cluster.roles), per save.
struct RolesReport {
  double checkpoint_bytes = 0;
  int every_steps = 0;
  double save_s = 0;            // the chief writing one checkpoint
  double evaluator_read_s = 0;  // the evaluator reading it back (0: no evaluator)
  double wait_for_storage_s = 0;  // what the next save waits for the evaluator's read to finish
  double stall_per_step_s = 0;  // (save + that wait) / every_steps: what every worker waits, per step
  double storage_write_GBps = 0, storage_read_GBps = 0;  // average load the roles put on storage
};

struct Result {
  std::string scenario;
  int gpus = 0;
  double params = 0;
  // Mixture of experts: parameters one token uses (models::ModelGraph::active_params), with and
  // without the input embedding table; and the all-to-all time of one step, per pipeline stage.
  double active_params = 0, active_params_without_input_embedding = 0;
  double all_to_all_s = 0;
  // What the gradient buckets' collectives ran as (network::runs_as), with how many buckets did:
  // where `auto` or NCCL chose, the algorithm configured is not the whole story.
  std::map<std::string, int> gradient_sync_runs_as;
  double step_time_s = 0;
  double samples_per_s = 0, tokens_per_s = 0;
  double model_flops = 0, hardware_flops = 0, model_tflops_per_gpu = 0, mfu = 0, hfu = 0;
  replay::Breakdown breakdown;
  // The share of a GPU's speed its collectives take while in flight (shared cores, or the SMs of a
  // stack's communication interference: comm_share_is_sms), for per-GPU breakdowns drawn later.
  double comm_core_share = 0;
  bool comm_share_is_sms = false;
  strategies::MemoryBreakdown memory;
  int worst_rank = 0;
  double capacity_bytes = 0;
  bool fits = true;
  // What the allocator caches beyond the allocated peak (strategies::allocator_slack; 0 when the
  // stack names no allocator): the GPU holds memory.peak() + this, what nvidia-smi reads and
  // what `fits` compares with the capacity.
  double allocator_slack = 0;
  double device_peak() const { return memory.peak() + allocator_slack; }
  std::vector<std::string> warnings;
  double measured_share = 0;
  // Relative spread of the compute time, from the kernel table's per-entry spreads; the step
  // time can move by at most this fraction when every kernel does.
  double compute_spread = 0;
  std::optional<faults::FaultReport> faults;
  std::optional<StepReport> steps;  // when several steps were simulated
  std::optional<AsyncReport> async;  // asynchronous data parallelism
  std::optional<RolesReport> roles;   // cluster.roles: chief checkpoints, evaluator
  std::optional<CapacityPlan> capacity;  // timed runs: the whole training run
  std::optional<RangeReport> range;      // `run`: the step and the run as P10/P50/P90 (ranges.hpp)
  std::optional<Fit> fewest_fit;         // when the scenario's GPUs do not hold the model
  std::string fewest_fit_stopped;        // why that search ended without an answer, if its budget did
  bool timed = true;  // false for `dtsim memory`
  // The breakdown's comm_interference part is shown (result.json, summary, report) under a
  // software stack or an expert all-to-all overlap (whose kernels hold SMs whatever the stack),
  // and only there, so other results keep their bytes.
  bool shows_interference() const {
    return !scenario_spec.device.stack.is_default() ||
           scenario_spec.parallelism.moe_a2a_overlap != strategies::ParallelismSpec::MoeOverlap::None;
  }

  config::Scenario scenario_spec;
  strategies::Plan plan;
  replay::Timeline timeline;
  std::vector<double> work_seconds, work_comm_seconds, work_interference_seconds;
  std::vector<double> work_all_to_all_seconds;  // of work_comm_seconds, overlapped expert all-to-alls' exposed part
  taskgraph::TaskGraph repeated;  // several steps, when simulated; else the plan's graph was replayed
  const taskgraph::TaskGraph& replayed() const { return steps ? repeated : plan.graph; }
  double wall_time_s = 0;
};

// Everything `run` does: model -> plan -> cost -> replay -> result. `search_fewest` false: no
// search for the fewest GPUs that fit when the scenario does not (a sweep ranks what it has).
Result simulate(const config::Scenario& s, bool search_fewest = true);
// Takes the planner's plan: memory (with the scenario's reserve), fit and FLOPs.
void adopt_plan(Result& r, strategies::Plan plan, const config::Scenario& s);
// The memory plan alone, no time simulation.
Result memory_only(const config::Scenario& s);

// The result per SPEC.md. With `with_wall_time` false it depends on the inputs alone, so
// result.json is byte-identical across runs; stdout's JSON carries the wall time.
nlohmann::ordered_json to_json(const Result& r, bool with_wall_time = true);

}  // namespace dtsim::results
