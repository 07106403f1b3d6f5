#pragma once
// The strategy search behind `dtsim sweep`: every candidate strategy on every cluster asked for,
// priced in closed form where it knows the strategy (else by the analytical replay), ranked, and
// the best of the ranking confirmed by the replay. The command line only parses and prints.
#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sim/config/scenario.hpp"
#include "sim/sweep/candidates.hpp"

namespace dtsim::sweep {

struct SearchOptions {
  std::string gpus, devices, precisions;  // comma-separated lists as the flags give them; empty: the scenario's
  std::string rank_by = "time";           // time, cost or throughput-per-gpu
  bool progress = false;                  // progress and ETA on stderr even when it is not a terminal
  int jobs = 0;                           // replays at once; 0: the machine's cores
  int confirm = 5;                        // replay the best `confirm` of the closed-form ranking
  bool exact = false;                     // replay every candidate
};

struct Outcome {
  config::Scenario scenario;  // as loaded
  std::vector<std::pair<std::string, cost::DeviceProfile>> devices;
  std::vector<Cluster> clusters;
  std::vector<Candidate> candidates;  // every one, in the order enumerated
  std::vector<Candidate> ranked;      // those that could be simulated, best first (fitting ones first)
  std::vector<std::pair<std::string, int>> failures;  // why the rest could not, most common first
  std::map<std::string, int> replayed_because;        // why the closed form left candidates to the replay
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

}  // namespace dtsim::sweep
