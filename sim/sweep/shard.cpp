#include "sim/sweep/shard.hpp"

#include <fmt/format.h>

#include "sim/core/errors.hpp"
#include "sim/sweep/part.hpp"

namespace dtsim::sweep {

using part::Json;

std::pair<int, int> parse_shard(const std::string& text) {
  const auto slash = text.find('/');
  const auto number = [](const std::string& s) {
    const bool digits = !s.empty() && s.size() <= 7 && s.find_first_not_of("0123456789") == std::string::npos;
    return digits ? std::stoi(s) : 0;
  };
  const int k = slash == std::string::npos ? 0 : number(text.substr(0, slash));
  const int n = slash == std::string::npos ? 0 : number(text.substr(slash + 1));
  if (k < 1 || n < 1 || k > n || n > (1 << 20))
    throw InputError("", "--shard", fmt::format("\"{}\" is not K/N with 1 <= K <= N (shard K of N, e.g. 2/8)", text));
  return {k, n};
}

std::string part_json(const std::string& path, const SearchOptions& o, const Outcome& out) {
  Json gaps = Json::object();
  for (const auto& [reason, n] : out.replayed_because) gaps[reason] = n;
  Json head{{"dtsim_sweep_part", part::kVersion}, {"dtsim_version", DTSIM_VERSION},
            {"dtsim_build", part::build()},
            {"scenario", path},                 {"fingerprint", part::fingerprint(path, out)},
            {"options", part::options(o)},       {"shard", o.shard},
            {"shards", o.shards},               {"candidates", out.enumerated},
            {"replayed_because", gaps},
            {"row", {"index", "gpus", "device", "strategy", "priced", "confirmed"}},
            {"prices", part::price_fields()}};
  std::string text = head.dump(1);
  text.pop_back();  // the closing brace: the rows follow, one a line
  while (text.back() == '\n') text.pop_back();
  text += ",\n \"rows\": [";
  for (std::size_t k = 0; k < out.candidates.size(); ++k) {
    const Candidate &now = out.candidates[k], &first = out.first_priced[k];
    // Replayed to confirm it: the replay either priced it or failed on it.
    const bool confirmed = now.replayed != first.replayed || now.valid != first.valid;
    const Json row{now.index, out.clusters[now.cluster].gpus, out.clusters[now.cluster].device,
                   describe(now), part::prices(first), confirmed ? part::prices(now) : Json(nullptr)};
    text += (k ? ",\n  " : "\n  ") + row.dump();
  }
  return text + "\n ]\n}\n";
}

}  // namespace dtsim::sweep
