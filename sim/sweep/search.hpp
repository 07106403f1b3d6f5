#pragma once
// The strategy search behind `dtsim sweep`: every candidate strategy on every cluster asked for,
// priced in closed form where it knows the strategy (else by the analytical replay), ranked, and
// the best of the ranking confirmed by the replay. The command line only parses and prints.
#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sim/config/scenario.hpp"
#include "sim/sweep/candidates.hpp"
#include "sim/sweep/limits.hpp"

namespace dtsim::sweep {

struct SearchOptions {
  std::string gpus, devices, precisions;  // comma-separated lists as the flags give them; empty: the scenario's
  std::string rank_by = "time";           // time, cost or throughput-per-gpu
  bool progress = false;                  // progress and ETA on stderr even when it is not a terminal
  int jobs = 0;                           // replays at once; 0: the machine's cores
  int confirm = 5;                        // replay the best `confirm` of the closed-form ranking
  bool exact = false;                     // replay every candidate
  // The planner's question (docs/sweeps.md): the best of each cluster, not of all together (the
  // best `confirm` of each cluster are replayed), among the candidates within `limits`.
  bool by_cluster = false;
  Limits limits;
  // Shard `shard` of `shards` (1-based; 0 of 0: the whole sweep) prices only the candidates whose
  // enumeration index i has i % shards == shard - 1, and confirms the best of those (shard.hpp).
  int shard = 0, shards = 0;
};

struct Outcome {
  config::Scenario scenario;  // as loaded
  std::vector<std::pair<std::string, cost::DeviceProfile>> devices;
  std::vector<Cluster> clusters;
  std::vector<Candidate> candidates;  // every one, in the order enumerated (a shard: its slice)
  // A shard's candidates as first priced, before the replay confirmed the best (what a merge
  // starts from); empty for a whole sweep.
  std::vector<Candidate> first_priced;
  std::vector<Candidate> ranked;      // those that could be simulated, best first (fitting ones first)
  std::vector<std::pair<std::string, int>> failures;  // why the rest could not, most common first
  std::map<std::string, int> replayed_because;        // why the closed form left candidates to the replay
  std::size_t enumerated = 0;  // the whole sweep's candidates (a shard's slice is a part of them)
  std::size_t duplicates = 0;  // the same strategy on the same cluster and device, enumerated again
  // Priced in closed form; replayed because the closed form does not know them; replayed to
  // confirm the best of the closed form's ranking.
  std::size_t closed_form = 0, replayed = 0, confirmed = 0;
  std::size_t fitting = 0, failed = 0;
  // The scenario gives a training length: rank by the whole run's time or cost, not per step.
  bool has_length = false;
  double gpus_of(const Candidate& c) const { return static_cast<double>(clusters[c.cluster].gpus); }
};

// Loads the scenario at `path` and runs the search; bad input (a flag's list, a device, a budget
// the sweep would pass) is an InputError naming the flag or key.
Outcome search(const std::string& path, const SearchOptions& o);

// The parts of `search` a merge of shards reuses (shard.hpp). `enumerate_sweep`: the scenario,
// devices, clusters and (the shard's) candidates, unpriced; the work budget checked when asked.
Outcome enumerate_sweep(const std::string& path, const SearchOptions& o, bool check_budget);
// Replays the candidates at these indices into `candidates`, each with its closed-form estimate kept.
using Replay = std::function<void(const std::vector<std::size_t>&)>;
// Ranks the priced candidates, has `replay` confirm the best until they are all replayed, and
// fills the ranking, failures and counts.
void rank(Outcome& out, const SearchOptions& o, const Replay& replay);

}  // namespace dtsim::sweep
