#pragma once
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "sim/config/scenario.hpp"
#include "sim/network/collectives.hpp"
#include "strategies/unit.hpp"

// What a simulation will cost, counted from the scenario before anything is planned or built, so
// that an input that would exhaust the machine is refused as bad input (exit 2) instead of running
// for hours or being killed for memory. Costs are modelled on this project's 2-core machine
// (docs/safety.md, "Input limits"): a run the limits allow takes at most about a minute and 4 GB there.
namespace dtsim::results {

inline constexpr double kMaxSimGridGpus = 65536;  // SimGrid builds a host and links per GPU
inline constexpr double kMaxTasks = 4e6;          // replayed, every step together
inline constexpr double kMaxSeconds = 60;
inline constexpr double kMaxBytes = 4e9;
inline constexpr double kMaxSweepSeconds = 120;  // a sweep keeps both cores busy for a minute

struct Estimate {
  double tasks = 0;    // planned tasks, times the steps replayed
  double flows = 0;    // network flows the replay simulates (an upper bound)
  double seconds = 0;  // modelled wall time
  double bytes = 0;    // modelled peak memory
};

// The cost of `simulate(s)` on `backend`; `replay` false: only the plan (`dtsim memory`).
Estimate estimate(const config::Scenario& s, config::Backend backend, bool replay = true);
// What the estimate reads from one tensor rank's slice of the model (built for it): the same for
// every candidate of a sweep with the same tensor split, sequence parallelism and expert split.
struct SliceFacts {
  // The slice itself: the planner's emitter and mechanism units count their tasks and collectives
  // over its chunks (strategies/unit.hpp).
  std::shared_ptr<const models::ModelGraph> graph;
  // Each stage's gradient bucket count over the slice, by (chunks, stages, stage, uneven stage
  // blocks, caps): candidates that lay the slice out alike share them.
  using BucketKey = std::tuple<int, int, int, std::vector<int>, strategies::SyncCaps>;
  std::shared_ptr<std::map<BucketKey, double>> buckets = std::make_shared<std::map<BucketKey, double>>();
};
SliceFacts slice_facts(const config::Scenario& s);
// The same from that slice, built already (candidates of a sweep share slices).
SliceFacts slice_facts(const config::Scenario& s, const models::ModelGraph& slice);
Estimate estimate(const config::Scenario& s, config::Backend backend, bool replay, const SliceFacts& facts);

// Throws InputError (the scenario's file, the key to change) when simulating `s` would exceed a
// limit, naming the limit and, when the scenario asks for SimGrid, whether the analytical
// backend would serve.
void check_budget(const config::Scenario& s, bool replay = true);

// Once planned, before anything is lowered or replayed: the same limits over the collectives the
// plan really holds (the analytical replay prices each distinct one once).
Estimate plan_estimate(const config::Scenario& s, const taskgraph::TaskGraph& g, config::Backend backend);
void check_plan_budget(const config::Scenario& s, const taskgraph::TaskGraph& g);

// `dtsim collective`: `rows` sizes of one collective on `gpus` GPUs of `cluster`.
void check_collective_budget(const network::ClusterSpec& cluster, taskgraph::CollectiveOp op, taskgraph::Algorithm a,
                             int gpus, double rows, bool analytical);

// `dtsim sweep`: every candidate strategy of `base`, on the analytical backend, together.
// `gpus_flag`: "--gpus" when the command line set the cluster size.
void check_sweep_budget(const config::Scenario& base, const std::vector<strategies::ParallelismSpec>& candidates,
                        const std::string& gpus_flag);

// A sweep over several clusters (sizes, devices): every group's candidates counted together.
struct SweepGroup {
  config::Scenario base;
  std::vector<strategies::ParallelismSpec> candidates;
  std::vector<strategies::Precision> precisions;  // each candidate's; empty: the base's
};
// Priced as the sweep prices them: with `confirm` >= 0, in closed form where it knows the
// strategy (closed_form_gap), and the best `confirm` replayed to confirm them (which ones is
// known only once priced: the costliest replays are counted); the rest replayed. `confirm` < 0
// (--exact): every candidate replayed. `confirm` 0: the closed form's candidates are counted by
// their closed form alone (none is replayed, so no replay is estimated for them), except those of
// over a million passes per step, which are still counted as replays.
void check_sweep_budget(const std::vector<SweepGroup>& groups, const std::string& gpus_flag, int confirm = -1);

// Modelled seconds of one collective (all its groups) replayed `count` times.
double collective_seconds(const network::FlowBound& b, double count, config::Backend backend);

// "1,048,576"
std::string with_commas(double n);

}  // namespace dtsim::results
