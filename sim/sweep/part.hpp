#pragma once
// The layout of a sweep's part file (`sweep --shard K/N`, read by `dtsim merge`): what a part
// says about its sweep and how a candidate's prices are written, exactly, and read back.
#include <nlohmann/json.hpp>
#include <string>

#include "sim/sweep/search.hpp"

namespace dtsim::sweep::part {

using Json = nlohmann::ordered_json;
constexpr int kVersion = 1;
// What every part of one sweep has the same.
constexpr const char* kSweepKeys[] = {"scenario", "fingerprint", "options", "shards", "candidates"};

// [valid, fits, replayed, the numbers, error or null]; price_fields() names them.
Json prices(const Candidate& c);
Json price_fields();
void read_prices(const Json& j, Candidate& c);  // std::exception on another layout
// What the outcome depends on besides the options: the scenario with its bases merged in, and
// each device profile's file (64-bit FNV-1a, a fingerprint, not a defence against anyone).
std::string fingerprint(const std::string& path, const Outcome& out);
// This dtsim binary's fingerprint: parts priced by another build would mix two builds' numbers.
std::string build();
// The options that decide what is priced and confirmed.
Json options(const SearchOptions& o);
SearchOptions options_from(const Json& j);  // nlohmann's exceptions on a bad field

}  // namespace dtsim::sweep::part
