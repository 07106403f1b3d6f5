#include "sim/sweep/shard.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "sim/config/merge.hpp"
#include "sim/core/errors.hpp"
#include "sim/core/files.hpp"

namespace dtsim::sweep {

namespace {

using Json = nlohmann::ordered_json;
constexpr int kPartVersion = 1;

// A candidate's prices: every field a row prints or the ranking reads.
constexpr std::pair<const char*, double Candidate::*> kNumbers[] = {
    {"step", &Candidate::step},
    {"samples_per_s", &Candidate::samples_per_s},
    {"mfu", &Candidate::mfu},
    {"peak", &Candidate::peak},
    {"price", &Candidate::price},
    {"cost_per_million_tokens", &Candidate::cost_per_million_tokens},
    {"time_to_train", &Candidate::time_to_train},
    {"gpu_hours", &Candidate::gpu_hours},
    {"cost", &Candidate::cost},
    {"energy_kwh", &Candidate::energy_kwh},
    {"capacity", &Candidate::capacity},
    {"estimate", &Candidate::estimate},
};

// Exactly, as C99's hexadecimal floating point ("0x1.8p+1"); strtod reads it back bit for bit.
std::string exact(double x) { return std::isfinite(x) ? fmt::format("{:a}", x) : fmt::format("{}", x); }

// [valid, fits, replayed, the numbers in kNumbers' order, error or null]: one short line per row
// (a million candidates make parts of hundreds of megabytes).
Json prices_json(const Candidate& c) {
  Json j = Json::array({c.valid, c.fits, c.replayed});
  for (const auto& [name, field] : kNumbers) j.push_back(exact(c.*field));
  j.push_back(c.valid ? Json(nullptr) : Json(c.error));
  return j;
}

Json price_fields() {
  Json j = Json::array({"valid", "fits", "replayed"});
  for (const auto& [name, field] : kNumbers) j.push_back(name);
  j.push_back("error");
  return j;
}

// 64-bit FNV-1a: a fingerprint, not a defence against anyone.
std::uint64_t fnv1a(const std::string& text, std::uint64_t h = 14695981039346656037ull) {
  for (unsigned char ch : text) h = (h ^ ch) * 1099511628211ull;
  return h;
}

// What the outcome depends on besides the options: the scenario with its bases merged in, and
// each device profile's file.
std::string fingerprint(const std::string& path, const Outcome& out) {
  std::uint64_t h = fnv1a(config::load_with_extends(path).json.dump());
  for (const auto& [name, d] : out.devices) h = fnv1a(name + "\n" + (d.file.empty() ? "" : read_text_file(d.file)), h);
  return fmt::format("{:016x}", h);
}

Json options_json(const SearchOptions& o) {
  return Json{{"gpus", o.gpus},
              {"devices", o.devices},
              {"precisions", o.precisions},
              {"rank_by", o.rank_by},
              {"confirm", o.confirm},
              {"exact", o.exact},
              {"by_cluster", o.by_cluster},
              {"max_days", o.limits.max_days},
              {"max_cost", o.limits.max_cost},
              {"min_headroom_gib", o.limits.min_headroom_gib}};
}

}  // namespace

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
  Json head{{"dtsim_sweep_part", kPartVersion}, {"dtsim_version", DTSIM_VERSION},
            {"scenario", path},                 {"fingerprint", fingerprint(path, out)},
            {"options", options_json(o)},       {"shard", o.shard},
            {"shards", o.shards},               {"candidates", out.enumerated},
            {"replayed_because", gaps},
            {"row", {"index", "gpus", "device", "strategy", "priced", "confirmed"}},
            {"prices", price_fields()}};
  std::string text = head.dump(1);
  text.pop_back();  // the closing brace: the rows follow, one a line
  while (text.back() == '\n') text.pop_back();
  text += ",\n \"rows\": [";
  for (std::size_t k = 0; k < out.candidates.size(); ++k) {
    const Candidate &now = out.candidates[k], &first = out.first_priced[k];
    // Replayed to confirm it: the replay either priced it or failed on it.
    const bool confirmed = now.replayed != first.replayed || now.valid != first.valid;
    const Json row{now.index, out.clusters[now.cluster].gpus, out.clusters[now.cluster].device,
                   describe(now.p, now.precision), prices_json(first), confirmed ? prices_json(now) : Json(nullptr)};
    text += (k ? ",\n  " : "\n  ") + row.dump();
  }
  return text + "\n ]\n}\n";
}

}  // namespace dtsim::sweep

namespace dtsim::sweep {

namespace {

// What every part of one sweep has the same.
constexpr const char* kSweepKeys[] = {"scenario", "fingerprint", "options", "shards", "candidates"};

SearchOptions options_from(const Json& j) {
  SearchOptions o;
  o.gpus = j.at("gpus");
  o.devices = j.at("devices");
  o.precisions = j.at("precisions");
  o.rank_by = j.at("rank_by");
  o.confirm = j.at("confirm");
  o.exact = j.at("exact");
  o.by_cluster = j.at("by_cluster");
  o.limits = {j.at("max_days"), j.at("max_cost"), j.at("min_headroom_gib")};
  return o;
}

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
  if (!p.doc.is_object() || p.doc.value("dtsim_sweep_part", 0) != kPartVersion)
    throw InputError(file, "/dtsim_sweep_part", "not a sweep part of this dtsim (dtsim sweep --shard K/N writes them)");
  try {  // every field the merge reads, of its type
    for (const char* key : kSweepKeys) (void)p.doc.at(key);
    (void)p.doc.at("shard").get<int>(), (void)p.doc.at("shards").get<int>(), (void)p.doc.at("candidates").get<std::size_t>();
    (void)p.doc.at("scenario").get<std::string>(), (void)options_from(p.doc.at("options"));
    for (const auto& [reason, count] : p.doc.at("replayed_because").items()) (void)count.get<int>();
    if (!p.doc.at("rows").is_array()) throw std::invalid_argument("its rows are not a list");
  } catch (const std::exception& e) {
    throw InputError(file, "", fmt::format("not a whole sweep part (dtsim sweep --shard K/N writes them): {}", e.what()));
  }
  if (p.doc.value("dtsim_version", "") != std::string(DTSIM_VERSION))
    throw InputError(file, "/dtsim_version",
                     fmt::format("made by dtsim {}, this is {}: run every shard and the merge with one build",
                                 p.doc.value("dtsim_version", "?"), DTSIM_VERSION));
  return p;
}

// What every part of one sweep has the same, from its first part.

Json sweep_of(const Part& p) {
  Json head = Json::object();
  for (const char* key : kSweepKeys) head[key] = p.doc.at(key);
  return head;
}

void check_same_sweep(const Part& p, const Json& head, const std::string& first_file) {
  for (const char* key : kSweepKeys)
    if (p.doc[key] != head[key])
      throw InputError(p.file, std::string("/") + key,
                       fmt::format("{} differs from {}'s: the parts are of different sweeps", p.doc[key].dump(), first_file));
}

// The prices a part holds, onto the candidate the merge enumerated.
void read_prices(const Json& j, Candidate& c) {
  if (!j.is_array() || j.size() != std::size(kNumbers) + 4) throw std::invalid_argument("prices of another layout");
  c.valid = j[0].get<bool>();
  c.fits = j[1].get<bool>();
  c.replayed = j[2].get<bool>();
  std::size_t k = 3;
  for (const auto& [name, field] : kNumbers) c.*field = std::strtod(j[k++].get_ref<const std::string&>().c_str(), nullptr);
  c.error = c.valid ? "" : j[k].get<std::string>();
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
  if (row.at(1) != cl.gpus || row.at(2) != cl.device || row.at(3) != describe(c.p, c.precision))
    throw InputError(p.file, fmt::format("/rows/{}", i),
                     fmt::format("is {} on {} x {}, this sweep enumerates {} on {} x {} there: the parts are of another "
                                 "dtsim build or inputs", row.at(3).dump(), row.at(1).dump(), row.at(2).dump(),
                                 describe(c.p, c.precision), cl.gpus, cl.device));
  read_prices(row.at(4), c);
  if (!row.at(5).is_null()) read_prices(row.at(5), confirmed[i] = c);
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
  Merged m{head.at("scenario"), options_from(head.at("options")), {}};
  try {
    m.out = enumerate_sweep(m.path, m.options, false);
  } catch (const InputError& e) {
    throw InputError(e.file(), e.pointer(),
                     e.reason() + " (merge reads the scenario the shards ran, by the path they were given: run it in their folder)");
  }
  if (fingerprint(m.path, m.out) != head.at("fingerprint") || m.out.candidates.size() != head.at("candidates"))
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
                                             describe(m.out.candidates[i].p, m.out.candidates[i].precision)));
      m.out.candidates[i] = it->second;
    }
  });
  return m;
}

}  // namespace dtsim::sweep
