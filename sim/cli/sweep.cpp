// `dtsim sweep`: runs the strategy search on main.cpp's options and prints the search's outcome
// (sim/sweep/search.hpp) as a table, CSV or JSON.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <iostream>

#include "sim/cli/commands.hpp"
#include "sim/cli/sweep_print.hpp"
#include "sim/core/files.hpp"
#include "sim/core/units.hpp"
#include "sim/sweep/plan.hpp"
#include "sim/sweep/search.hpp"
#include "sim/sweep/shard.hpp"

namespace dtsim::cli {

// RFC 4180: a field with a comma, quote or line break is quoted, its quotes doubled.
std::string csv_field(const std::string& v) {
  if (v.find_first_of(",\"\r\n") == std::string::npos) return v;
  std::string q = "\"";
  for (char c : v) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

const char* priced_by(const sweep::Candidate& c) { return c.replayed ? "replay" : "closed-form"; }

std::string ranked_by(const std::string& rank_by, bool has_length) {
  return rank_by == "throughput-per-gpu" ? "samples/s per GPU"
         : rank_by == "cost" ? (has_length ? "cost to train" : "cost per million tokens (no training length: set training.tokens or training.steps for the cost to train)")
                             : (has_length ? "time to train" : "step time (no training length: set training.tokens or training.steps for the time to train)");
}

namespace {

using sweep::Candidate;
using sweep::Outcome;
using Rows = std::vector<const Candidate*>;

// Every row (every evaluated candidate, or those within the limits), best first.
void print_csv(const Outcome& r, const Rows& rows) {
  std::cout << "rank,gpus,device,strategy,tensor,pipeline,data,micro_batch_size,pipeline_schedule,virtual_stages,zero_stage,"
               "recompute,sequence_parallel,step_time_s,samples_per_s,samples_per_s_per_gpu,mfu,peak_bytes,fits,"
               "price_per_gpu_hour_usd,cost_per_million_tokens_usd,time_to_train_s,gpu_hours,cost_usd,priced_by,context,precision\r\n";
  auto opt = [&](double v) { return r.has_length ? fmt::format("{}", v) : std::string(); };
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& c = *rows[i];
    std::cout << fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\r\n", i + 1,
                             r.clusters[c.cluster].gpus, csv_field(r.clusters[c.cluster].device), csv_field(sweep::describe(c)),
                             c.p.tensor, c.p.pipeline, c.p.data, c.p.micro_batch, strategies::to_string(c.p.schedule),
                             c.p.virtual_stages, c.p.zero_stage, strategies::to_string(c.p.recompute),
                             c.p.sequence_parallel, c.step, c.samples_per_s, c.samples_per_s / r.gpus_of(c), c.mfu, c.peak,
                             c.fits, c.price, c.cost_per_million_tokens, opt(c.time_to_train), opt(c.gpu_hours), opt(c.cost),
                             priced_by(c), c.p.context, sweep::precision_name(c.precision));
  }
}

}  // namespace

nlohmann::ordered_json json_row(const Outcome& r, const Candidate& c) {
  nlohmann::ordered_json row{{"strategy", sweep::describe(c)}, {"gpus", r.clusters[c.cluster].gpus}, {"device", r.clusters[c.cluster].device},
                             {"tensor", c.p.tensor}, {"pipeline", c.p.pipeline},
                             {"data", c.p.data}, {"expert", c.p.expert}, {"micro_batch_size", c.p.micro_batch}, {"zero_stage", c.p.zero_stage},
                             {"recompute", strategies::to_string(c.p.recompute)}, {"step_time_s", c.step},
                             {"samples_per_s", c.samples_per_s}, {"samples_per_s_per_gpu", c.samples_per_s / r.gpus_of(c)},
                             {"mfu", c.mfu}, {"peak_bytes", c.peak}, {"fits", c.fits},
                             {"price_per_gpu_hour_usd", c.price}, {"cost_per_million_tokens_usd", c.cost_per_million_tokens},
                             {"priced_by", priced_by(c)},
                             {"context", c.p.context},
                             {"precision", sweep::precision_name(c.precision)}};
  if (c.estimate > 0) row["closed_form_step_time_s"] = c.estimate;
  if (r.has_length) {
    row["time_to_train_s"] = c.time_to_train;
    row["gpu_hours"] = c.gpu_hours;
    row["cost_usd"] = c.cost;
  }
  return row;
}

nlohmann::ordered_json limits_json(const sweep::Limits& l) {
  return {{"max_days", l.max_days > 0 ? nlohmann::ordered_json(l.max_days) : nullptr},
          {"max_cost_usd", l.max_cost > 0 ? nlohmann::ordered_json(l.max_cost) : nullptr},
          {"min_headroom_gib", l.min_headroom_gib > 0 ? nlohmann::ordered_json(l.min_headroom_gib) : nullptr}};
}

namespace {

void print_json(const Outcome& r, const SweepOptions& o, const sweep::Limits& limits, const Rows& shown) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array(), why = nlohmann::ordered_json::array(),
                         cl = nlohmann::ordered_json::array();
  const std::size_t top = std::min(shown.size(), static_cast<std::size_t>(o.top));
  for (std::size_t i = 0; i < top; ++i) rows.push_back(json_row(r, *shown[i]));
  for (const auto& [reason, n] : r.failures) why.push_back({{"reason", reason}, {"count", n}});
  nlohmann::ordered_json replayed_because = nlohmann::ordered_json::array();
  for (const auto& [reason, n] : r.replayed_because) replayed_because.push_back({{"reason", reason}, {"count", n}});
  for (const auto& c : r.clusters) cl.push_back({{"gpus", c.gpus}, {"device", c.device}});
  nlohmann::ordered_json j{{"scenario", r.scenario.name}, {"gpus", r.clusters.front().gpus}, {"clusters", cl},
                           {"rank_by", o.rank_by}, {"ranked_by", ranked_by(o.rank_by, r.has_length)},
                           {"candidates", r.candidates.size()}, {"duplicates_dropped", r.duplicates},
                           {"evaluated", r.ranked.size()}, {"fitting", r.fitting},
                           {"does_not_fit", r.ranked.size() - r.fitting}, {"failed", r.failed}, {"failures", why},
                           {"closed_form", r.closed_form}, {"replayed", r.replayed + r.confirmed},
                           {"confirmed", r.confirmed}, {"replayed_because", replayed_because}};
  if (limits.any()) j["limits"] = limits_json(limits), j["within_limits"] = shown.size();
  j["rows"] = rows;
  std::cout << j.dump(2) << "\n";
}

}  // namespace

// The counts, why candidates were replayed or failed, and what "best" means.
void print_text_header(const Outcome& r, const SweepOptions& o, const std::string& none_fits) {
  const std::string how =
      r.closed_form == 0 ? "analytical replay"
                         : fmt::format("{} ranked in closed form, the best {} confirmed by the analytical replay{}", r.closed_form,
                                       o.by_cluster ? fmt::format("{} of each cluster ({} replays)", o.confirm, r.confirmed)
                                                    : fmt::format("{}", r.confirmed),
                                       r.replayed == 0 ? "" : fmt::format(", {} replayed", r.replayed));
  std::string where;
  for (const auto& c : r.clusters) where += fmt::format("{}{} x {}", where.empty() ? "" : ", ", c.gpus, c.device);
  std::cout << fmt::format("{}: {} strategies on {} ({}): {} evaluated, {} fit, {} do not fit, {} failed{}\n",
                           r.scenario.name, r.candidates.size(), where, how, r.ranked.size(), r.fitting, r.ranked.size() - r.fitting,
                           r.failed, r.duplicates ? fmt::format(", {} duplicates dropped", r.duplicates) : "");
  for (const auto& [reason, n] : r.replayed_because)
    if (reason != "--exact") std::cout << fmt::format("  {} replayed: the closed form does not know {}\n", n, reason);
  std::cout << "ranked by " << ranked_by(o.rank_by, r.has_length) << "\n";
  if (const auto limits = limits_of(o); limits.any()) {
    const std::string outside = sweep::outside_counts(r, limits);
    std::cout << fmt::format("{} within {}{}\n", sweep::within_limits(r, limits).size(), limits_text(limits),
                             outside.empty() ? "" : "; outside them: " + outside);
  }
  const std::size_t shown = std::min<std::size_t>(r.failures.size(), 5);
  for (std::size_t i = 0; i < shown; ++i) std::cout << fmt::format("  {} failed: {}\n", r.failures[i].second, r.failures[i].first);
  if (r.failures.size() > shown)
    std::cout << fmt::format("  ... and {} other reasons (--format json lists them)\n", r.failures.size() - shown);
  if (!none_fits.empty()) std::cout << none_fits << "\n";
  std::cout << "\n";
}

namespace {

void print_text(const Outcome& r, const SweepOptions& o, const Rows& rows, const std::string& none_fits) {
  print_text_header(r, o, none_fits);
  const bool multi = r.clusters.size() > 1;
  std::cout << fmt::format("{:>4}  {}{:<56} {:>10} {:>11} {:>9} {:>6} {:>9} {:>9}{}\n", "rank",
                           multi ? fmt::format("{:>6} {:<14} ", "gpus", "device") : "", "strategy", "step_s", "samples/s",
                           "per_GPU", "MFU", "peak_GiB", "$/Mtok", r.has_length ? fmt::format(" {:>10} {:>12}", "days", "cost_$") : "");
  const std::size_t top = std::min(rows.size(), static_cast<std::size_t>(o.top));
  for (std::size_t i = 0; i < top; ++i) {
    const auto& c = *rows[i];
    std::cout << fmt::format("{:>4}  {}{:<56} {:>10.4f} {:>11.1f} {:>9.2f} {:>5.1f}% {:>9.1f} {:>9.4f}{}{}\n", i + 1,
                             multi ? fmt::format("{:>6} {:<14} ", r.clusters[c.cluster].gpus, r.clusters[c.cluster].device) : "",
                             sweep::describe(c), c.step, c.samples_per_s, c.samples_per_s / r.gpus_of(c), 100 * c.mfu,
                             c.peak / units::kGiB, c.cost_per_million_tokens,
                             r.has_length ? fmt::format(" {:>10.2f} {:>12.0f}", c.time_to_train / 86400, c.cost) : "",
                             c.fits ? "" : "  does not fit");
  }
  if (!rows.empty() && rows[0]->fits && !o.write_best.empty()) std::cout << fmt::format("\nwrote {} (rank 1)\n", o.write_best);
}

sweep::SearchOptions search_options(const SweepOptions& o) {
  sweep::SearchOptions s;
  s.gpus = o.gpus, s.devices = o.devices, s.precisions = o.precisions, s.rank_by = o.rank_by;
  s.progress = o.progress, s.jobs = o.jobs, s.confirm = o.confirm, s.exact = o.exact;
  s.by_cluster = o.by_cluster;
  s.limits = limits_of(o);
  if (!o.shard.empty()) std::tie(s.shard, s.shards) = sweep::parse_shard(o.shard);
  return s;
}

}  // namespace

sweep::Limits limits_of(const SweepOptions& o) { return {o.max_days, o.max_cost, o.min_headroom}; }

std::string limits_text(const sweep::Limits& l) {
  std::string text;
  const auto add = [&](const std::string& part) { text += (text.empty() ? "" : ", ") + part; };
  if (l.max_days > 0) add("at most " + sweep::human_days(l.max_days * 86400));
  if (l.max_cost > 0) add("at most " + sweep::human_money(l.max_cost));
  if (l.min_headroom_gib > 0) add(fmt::format("at least {:g} GiB free per GPU", l.min_headroom_gib));
  return "the limits (" + text + ")";
}

// The outcome as a table, CSV or JSON; the winner written when asked. Exit 3 when nothing fits
// (or nothing is within the limits).
int report(const Outcome& r, const SweepOptions& o) {
  const auto limits = limits_of(o);
  const Rows rows = limits.any() ? sweep::within_limits(r, limits) : [&] {
    Rows all;
    for (const auto& c : r.ranked) all.push_back(&c);
    return all;
  }();
  const bool none = limits.any() ? rows.empty() : r.fitting == 0;
  // Nothing to recommend: a check the user implicitly asked for failed (exit 3, SPEC.md).
  const int code = none ? 3 : 0;
  std::string memories;
  for (const auto& [name, d] : r.devices)
    memories += fmt::format("{}{:.0f} GiB", memories.empty() ? "" : " or ", d.memory_bytes / units::kGiB);
  const std::string none_fits = !none ? ""
                                : r.fitting == 0 ? fmt::format("no strategy fits in {} per GPU", memories)
                                                 : "no strategy is within " + limits_text(limits);
  if (!none && !o.write_best.empty())
    write_file_atomic(o.write_best, sweep::best_scenario(o.scenario, r.clusters[rows[0]->cluster], rows[0]->p, rows[0]->precision));
  if (o.by_cluster) print_plan(r, o, none_fits);
  else if (o.format == "csv") print_csv(r, rows);
  else if (o.format == "json") print_json(r, o, limits, rows);
  else print_text(r, o, rows, none_fits);
  if (code && (o.format == "csv" || o.format == "json")) std::cerr << r.scenario.name << ": " << none_fits << "\n";
  return code;
}

int sweep(const SweepOptions& o) {
  if (!o.write_best.empty()) check_output_path(o.write_best);  // before the work, so a bad path costs nothing
  if (!o.part_out.empty()) check_output_path(o.part_out);
  const auto options = search_options(o);
  const Outcome r = sweep::search(o.scenario, options);
  if (options.shards > 0) {
    const std::string part = sweep::part_json(o.scenario, options, r);
    if (o.part_out.empty()) std::cout << part;
    else write_file_atomic(o.part_out, part);
    return 0;
  }
  return report(r, o);
}

int merge(const MergeOptions& o) {
  if (!o.write_best.empty()) check_output_path(o.write_best);
  const auto m = sweep::merge_parts(o.parts);
  SweepOptions view;
  view.scenario = m.path;
  view.format = o.format;
  view.top = o.top;
  view.write_best = o.write_best;
  view.per_cluster = o.per_cluster;
  view.rank_by = m.options.rank_by;
  view.confirm = m.options.confirm;
  view.by_cluster = m.options.by_cluster;
  view.max_days = m.options.limits.max_days;
  view.max_cost = m.options.limits.max_cost;
  view.min_headroom = m.options.limits.min_headroom_gib;
  return report(m.out, view);
}

}  // namespace dtsim::cli
