#pragma once
// Sweeps beyond one machine: `sweep --shard K/N` prices one slice of the candidates and writes a
// part file; `dtsim merge` joins the N parts into the outcome the whole sweep would have had, so
// its output is byte for byte the unsharded sweep's (docs/sweeps.md).
//
// Slice: the candidates whose enumeration index i (duplicates dropped, every cluster in order)
// has i % N == K - 1. Confirmation: each shard replays the best `confirm` of its own slice, as
// the whole sweep would replay them, and its part keeps each candidate's closed-form price and,
// for those it replayed, the replay's. The merge ranks the union and runs the whole sweep's
// confirmation again, taking each replay from the parts instead of replaying: a candidate the
// whole sweep replays is always one its shard replayed (its slice has fewer rivals above it), so
// nothing is replayed twice and nothing is missing. A merge that would need a replay no part
// holds fails (exit 1) rather than print a different answer.
#include <string>
#include <vector>

#include "sim/sweep/search.hpp"

namespace dtsim::sweep {

// "K/N" with 1 <= K <= N <= 1048576; anything else an InputError naming --shard.
std::pair<int, int> parse_shard(const std::string& text);

// The part file of a shard's outcome: the sweep's options, a fingerprint of its inputs, and
// each candidate of the slice with its prices (doubles as exact hexadecimal floats).
std::string part_json(const std::string& path, const SearchOptions& o, const Outcome& out);

struct Merged {
  std::string path;      // the scenario as the shards were given it
  SearchOptions options;  // as the shards ran, without the shard
  Outcome out;
};
// Reads every part (each shard exactly once, all of the same sweep, the scenario unchanged since)
// and rebuilds the whole sweep's outcome. Bad or mismatched parts are InputErrors naming the file.
Merged merge_parts(const std::vector<std::string>& files);

}  // namespace dtsim::sweep
