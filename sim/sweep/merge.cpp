// `dtsim merge`: the parts of a sharded sweep read (one at a time), checked to be one whole sweep,
// and its outcome rebuilt (sim/sweep/shard.hpp says why it is the whole sweep's).
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <stdexcept>

#include "sim/core/errors.hpp"
#include "sim/core/files.hpp"
#include "sim/sweep/part.hpp"
#include "sim/sweep/shard.hpp"

namespace dtsim::sweep {

namespace {

using part::Json;

// One part file as read, with the file's name for errors.
struct Part {
  std::string file;
  Json doc;
};

Part read_part(const std::string& file) {
  Part p{file, {}};
  try {
    p.doc = Json::parse(read_text_file(file));
  } catch (const Json::exception& e) {
    throw InputError(file, "", fmt::format("not a sweep part (dtsim sweep --shard K/N writes them): {}", e.what()));
  }
  if (!p.doc.is_object() || p.doc.value("dtsim_sweep_part", 0) != part::kVersion)
    throw InputError(file, "/dtsim_sweep_part", "not a sweep part of this dtsim (dtsim sweep --shard K/N writes them)");
  try {  // every field the merge reads, of its type
    for (const char* key : part::kSweepKeys) (void)p.doc.at(key);
    (void)p.doc.at("shard").get<int>(), (void)p.doc.at("shards").get<int>(), (void)p.doc.at("candidates").get<std::size_t>();
    (void)p.doc.at("scenario").get<std::string>(), (void)part::options_from(p.doc.at("options"));
    for (const auto& [reason, count] : p.doc.at("replayed_because").items()) (void)count.get<int>();
    if (!p.doc.at("rows").is_array()) throw std::invalid_argument("its rows are not a list");
  } catch (const std::exception& e) {
    throw InputError(file, "", fmt::format("not a whole sweep part (dtsim sweep --shard K/N writes them): {}", e.what()));
  }
  if (p.doc.value("dtsim_version", "") != std::string(DTSIM_VERSION))
    throw InputError(file, "/dtsim_version",
                     fmt::format("made by dtsim {}, this is {}: run every shard and the merge with one build",
                                 p.doc.value("dtsim_version", "?"), DTSIM_VERSION));
  if (p.doc.value("dtsim_build", "") != part::build())
    throw InputError(file, "/dtsim_build", "made by another dtsim build (its binary differs from this one): run every shard and the merge with one build");
  return p;
}

// What every part of one sweep has the same, from its first part.

Json sweep_of(const Part& p) {
  Json head = Json::object();
  for (const char* key : part::kSweepKeys) head[key] = p.doc.at(key);
  return head;
}

void check_same_sweep(const Part& p, const Json& head, const std::string& first_file) {
  for (const char* key : part::kSweepKeys)
    if (p.doc[key] != head[key])
      throw InputError(p.file, std::string("/") + key,
                       fmt::format("{} differs from {}'s: the parts are of different sweeps", p.doc[key].dump(), first_file));
}

// One row onto its candidate (checked to be the one this sweep enumerates there); its
// confirmation kept aside.
void read_row(const Part& p, const Json& row, Outcome& out, std::map<std::size_t, Candidate>& confirmed, std::vector<char>& seen) {
  const auto k = p.doc["shard"].get<std::size_t>(), n = p.doc["shards"].get<std::size_t>();
  const auto i = row.at(0).get<std::size_t>();
  if (i >= out.candidates.size() || i % n != k - 1 || seen[i])
    throw InputError(p.file, "/rows", fmt::format("candidate {} does not belong to shard {}/{} or is there twice", i, k, n));
  seen[i] = 1;
  Candidate& c = out.candidates[i];
  const auto& cl = out.clusters[c.cluster];
  if (row.at(1) != cl.gpus || row.at(2) != cl.device || row.at(3) != describe(c))
    throw InputError(p.file, fmt::format("/rows/{}", i),
                     fmt::format("is {} on {} x {}, this sweep enumerates {} on {} x {} there: the parts are of another "
                                 "dtsim build or inputs", row.at(3).dump(), row.at(1).dump(), row.at(2).dump(),
                                 describe(c), cl.gpus, cl.device));
  part::read_prices(row.at(4), c);
  if (!row.at(5).is_null()) part::read_prices(row.at(5), confirmed[i] = c);
}

void read_rows(const Part& p, Outcome& out, std::map<std::size_t, Candidate>& confirmed, std::vector<char>& seen) {
  try {
    for (const auto& row : p.doc.at("rows")) read_row(p, row, out, confirmed, seen);
  } catch (const InputError&) {
    throw;
  } catch (const std::exception& e) {  // a field of the wrong type, a row cut short
    throw InputError(p.file, "/rows", fmt::format("not a row of a sweep part: {}", e.what()));
  }
}

}  // namespace

namespace {

// The sweep the parts come from, enumerated again from the scenario they name, unpriced.
Merged open_sweep(const Json& head) {
  Merged m{head.at("scenario"), part::options_from(head.at("options")), {}};
  try {
    m.out = enumerate_sweep(m.path, m.options, false);
  } catch (const InputError& e) {
    throw InputError(e.file(), e.pointer(),
                     e.reason() + " (merge reads the scenario the shards ran, by the path they were given: run it in their folder)");
  }
  if (part::fingerprint(m.path, m.out) != head.at("fingerprint") || m.out.candidates.size() != head.at("candidates"))
    throw InputError(m.path, "", "changed since the shards ran (its contents, a base or a device profile): run the shards again");
  return m;
}

}  // namespace

Merged merge_parts(const std::vector<std::string>& files) {
  if (files.empty()) throw InputError("", "", "merge needs the part files of a sharded sweep");
  // One part in memory at a time: a million candidates' parts are large.
  Part first = read_part(files.front());
  const Json head = sweep_of(first);
  Merged m = open_sweep(head);
  const int n = head.at("shards").get<int>();
  std::map<int, std::string> shard_files;
  std::map<std::size_t, Candidate> confirmed;
  std::vector<char> seen(m.out.candidates.size(), 0);
  for (std::size_t f = 0; f < files.size(); ++f) {
    const Part p = f == 0 ? std::move(first) : read_part(files[f]);
    check_same_sweep(p, head, files.front());
    const int k = p.doc.at("shard").get<int>();
    if (!shard_files.emplace(k, p.file).second)
      throw InputError(p.file, "/shard", fmt::format("shard {}/{} is also {}: give each part once", k, n, shard_files[k]));
    read_rows(p, m.out, confirmed, seen);
    for (const auto& [reason, count] : p.doc.at("replayed_because").items()) {
      m.out.replayed_because[reason] += count.get<int>();
      m.out.replayed += count.get<std::size_t>();
    }
  }
  for (int k = 1; k <= n; ++k)
    if (!shard_files.contains(k))
      throw InputError("", "", fmt::format("shard {}/{} is missing: merge needs all {} parts of the sweep", k, n, n));
  if (const auto gap = std::find(seen.begin(), seen.end(), 0); gap != seen.end())
    throw InputError("", "", fmt::format("no part holds candidate {}: a part is cut short (its shard may have failed)", gap - seen.begin()));
  m.out.closed_form = m.out.candidates.size() - m.out.replayed;
  rank(m.out, m.options, [&](const std::vector<std::size_t>& which) {
    for (auto i : which) {
      const auto it = confirmed.find(i);
      if (it == confirmed.end())
        throw std::runtime_error(fmt::format("the parts lack the replay of candidate {} ({}), which this merge confirms: "
                                             "were they made by another dtsim build?", i,
                                             describe(m.out.candidates[i])));
      m.out.candidates[i] = it->second;
    }
  });
  return m;
}

}  // namespace dtsim::sweep
