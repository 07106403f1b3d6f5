// `dtsim sweep`: runs the strategy search on main.cpp's options and prints the search's outcome
// (sim/sweep/search.hpp) as a table, CSV or JSON.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <iostream>

#include "sim/cli/commands.hpp"
#include "sim/core/files.hpp"
#include "sim/core/units.hpp"
#include "sim/sweep/search.hpp"

namespace dtsim::cli {

namespace {

using sweep::Candidate;
using sweep::Outcome;

// RFC 4180: a field with a comma, quote or line break is quoted, its quotes doubled.
std::string csv_field(const std::string& v) {
  if (v.find_first_of(",\"\r\n") == std::string::npos) return v;
  std::string q = "\"";
  for (char c : v) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

const char* priced_by(const Candidate& c) { return c.replayed ? "replay" : "closed-form"; }

std::string ranked_by(const std::string& rank_by, bool has_length) {
  return rank_by == "throughput-per-gpu" ? "samples/s per GPU"
         : rank_by == "cost" ? (has_length ? "cost to train" : "cost per million tokens (no training length: set training.tokens or training.steps for the cost to train)")
                             : (has_length ? "time to train" : "step time (no training length: set training.tokens or training.steps for the time to train)");
}

// Every evaluated candidate, best first.
void print_csv(const Outcome& r) {
  std::cout << "rank,gpus,device,strategy,tensor,pipeline,data,micro_batch_size,pipeline_schedule,virtual_stages,zero_stage,"
               "recompute,sequence_parallel,step_time_s,samples_per_s,samples_per_s_per_gpu,mfu,peak_bytes,fits,"
               "price_per_gpu_hour_usd,cost_per_million_tokens_usd,time_to_train_s,gpu_hours,cost_usd,priced_by,context,precision\r\n";
  auto opt = [&](double v) { return r.has_length ? fmt::format("{}", v) : std::string(); };
  for (std::size_t i = 0; i < r.ranked.size(); ++i) {
    const auto& c = r.ranked[i];
    std::cout << fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\r\n", i + 1,
                             r.clusters[c.cluster].gpus, csv_field(r.clusters[c.cluster].device), csv_field(sweep::describe(c.p, c.precision)),
                             c.p.tensor, c.p.pipeline, c.p.data, c.p.micro_batch, strategies::to_string(c.p.schedule),
                             c.p.virtual_stages, c.p.zero_stage, strategies::to_string(c.p.recompute),
                             c.p.sequence_parallel, c.step, c.samples_per_s, c.samples_per_s / r.gpus_of(c), c.mfu, c.peak,
                             c.fits, c.price, c.cost_per_million_tokens, opt(c.time_to_train), opt(c.gpu_hours), opt(c.cost),
                             priced_by(c), c.p.context, sweep::precision_name(c.precision));
  }
}

nlohmann::ordered_json json_row(const Outcome& r, const Candidate& c) {
  nlohmann::ordered_json row{{"strategy", sweep::describe(c.p, c.precision)}, {"gpus", r.clusters[c.cluster].gpus}, {"device", r.clusters[c.cluster].device},
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

void print_json(const Outcome& r, const SweepOptions& o) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array(), why = nlohmann::ordered_json::array(),
                         cl = nlohmann::ordered_json::array();
  const std::size_t top = std::min(r.ranked.size(), static_cast<std::size_t>(o.top));
  for (std::size_t i = 0; i < top; ++i) rows.push_back(json_row(r, r.ranked[i]));
  for (const auto& [reason, n] : r.failures) why.push_back({{"reason", reason}, {"count", n}});
  nlohmann::ordered_json replayed_because = nlohmann::ordered_json::array();
  for (const auto& [reason, n] : r.replayed_because) replayed_because.push_back({{"reason", reason}, {"count", n}});
  for (const auto& c : r.clusters) cl.push_back({{"gpus", c.gpus}, {"device", c.device}});
  std::cout << nlohmann::ordered_json{{"scenario", r.scenario.name}, {"gpus", r.clusters.front().gpus}, {"clusters", cl},
                                      {"rank_by", o.rank_by}, {"ranked_by", ranked_by(o.rank_by, r.has_length)},
                                      {"candidates", r.candidates.size()}, {"duplicates_dropped", r.duplicates},
                                      {"evaluated", r.ranked.size()}, {"fitting", r.fitting},
                                      {"does_not_fit", r.ranked.size() - r.fitting}, {"failed", r.failed}, {"failures", why},
                                      {"closed_form", r.closed_form}, {"replayed", r.replayed + r.confirmed},
                                      {"confirmed", r.confirmed}, {"replayed_because", replayed_because},
                                      {"rows", rows}}.dump(2) << "\n";
}

// The counts, why candidates were replayed or failed, and what "best" means.
void print_text_header(const Outcome& r, const SweepOptions& o, const std::string& none_fits) {
  const std::string how =
      r.closed_form == 0 ? "analytical replay"
                         : fmt::format("{} ranked in closed form, the best {} confirmed by the analytical replay{}", r.closed_form,
                                       r.confirmed, r.replayed == 0 ? "" : fmt::format(", {} replayed", r.replayed));
  std::string where;
  for (const auto& c : r.clusters) where += fmt::format("{}{} x {}", where.empty() ? "" : ", ", c.gpus, c.device);
  std::cout << fmt::format("{}: {} strategies on {} ({}): {} evaluated, {} fit, {} do not fit, {} failed{}\n",
                           r.scenario.name, r.candidates.size(), where, how, r.ranked.size(), r.fitting, r.ranked.size() - r.fitting,
                           r.failed, r.duplicates ? fmt::format(", {} duplicates dropped", r.duplicates) : "");
  for (const auto& [reason, n] : r.replayed_because)
    if (reason != "--exact") std::cout << fmt::format("  {} replayed: the closed form does not know {}\n", n, reason);
  std::cout << "ranked by " << ranked_by(o.rank_by, r.has_length) << "\n";
  const std::size_t shown = std::min<std::size_t>(r.failures.size(), 5);
  for (std::size_t i = 0; i < shown; ++i) std::cout << fmt::format("  {} failed: {}\n", r.failures[i].second, r.failures[i].first);
  if (r.failures.size() > shown)
    std::cout << fmt::format("  ... and {} other reasons (--format json lists them)\n", r.failures.size() - shown);
  if (r.fitting == 0) std::cout << none_fits << "\n";
  std::cout << "\n";
}

void print_text(const Outcome& r, const SweepOptions& o, const std::string& none_fits) {
  print_text_header(r, o, none_fits);
  const bool multi = r.clusters.size() > 1;
  std::cout << fmt::format("{:>4}  {}{:<56} {:>10} {:>11} {:>9} {:>6} {:>9} {:>9}{}\n", "rank",
                           multi ? fmt::format("{:>6} {:<14} ", "gpus", "device") : "", "strategy", "step_s", "samples/s",
                           "per_GPU", "MFU", "peak_GiB", "$/Mtok", r.has_length ? fmt::format(" {:>10} {:>12}", "days", "cost_$") : "");
  const std::size_t top = std::min(r.ranked.size(), static_cast<std::size_t>(o.top));
  for (std::size_t i = 0; i < top; ++i) {
    const auto& c = r.ranked[i];
    std::cout << fmt::format("{:>4}  {}{:<56} {:>10.4f} {:>11.1f} {:>9.2f} {:>5.1f}% {:>9.1f} {:>9.4f}{}{}\n", i + 1,
                             multi ? fmt::format("{:>6} {:<14} ", r.clusters[c.cluster].gpus, r.clusters[c.cluster].device) : "",
                             sweep::describe(c.p, c.precision), c.step, c.samples_per_s, c.samples_per_s / r.gpus_of(c), 100 * c.mfu,
                             c.peak / units::kGiB, c.cost_per_million_tokens,
                             r.has_length ? fmt::format(" {:>10.2f} {:>12.0f}", c.time_to_train / 86400, c.cost) : "",
                             c.fits ? "" : "  does not fit");
  }
  if (r.fitting && !o.write_best.empty()) std::cout << fmt::format("\nwrote {} (rank 1)\n", o.write_best);
}

}  // namespace

int sweep(const SweepOptions& o) {
  if (!o.write_best.empty()) check_output_path(o.write_best);  // before the work, so a bad path costs nothing
  const Outcome r = sweep::search(o.scenario, {.gpus = o.gpus, .devices = o.devices, .precisions = o.precisions,
                                               .rank_by = o.rank_by, .progress = o.progress, .jobs = o.jobs,
                                               .confirm = o.confirm, .exact = o.exact});
  // Nothing to recommend: a check the user implicitly asked for failed (exit 3, SPEC.md).
  const int code = r.fitting == 0 ? 3 : 0;
  std::string memories;
  for (const auto& [name, d] : r.devices)
    memories += fmt::format("{}{:.0f} GiB", memories.empty() ? "" : " or ", d.memory_bytes / units::kGiB);
  const std::string none_fits = fmt::format("no strategy fits in {} per GPU", memories);
  if (r.fitting && !o.write_best.empty())
    write_file_atomic(o.write_best, sweep::best_scenario(o.scenario, r.clusters[r.ranked[0].cluster], r.ranked[0].p, r.ranked[0].precision));
  if (o.format == "csv" || o.format == "json") {
    if (o.format == "csv") print_csv(r);
    else print_json(r, o);
    if (code) std::cerr << r.scenario.name << ": " << none_fits << "\n";
    return code;
  }
  print_text(r, o, none_fits);
  return code;
}

}  // namespace dtsim::cli
