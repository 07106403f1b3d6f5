// `dtsim sweep --by-cluster` (and `merge` of such a sweep): the planner's answer, the best
// strategies of each cluster size and device within the limits, as a table for people (money,
// times and energy with units, columns as wide as their longest entry) and as CSV and JSON that
// carry the same rows and fields.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <utility>
#include <vector>

#include "sim/cli/sweep_print.hpp"
#include "sim/core/units.hpp"
#include "sim/sweep/plan.hpp"

namespace dtsim::cli {

namespace {

using sweep::Candidate;
using sweep::Outcome;
using sweep::PlanRow;
using Json = nlohmann::ordered_json;
using Fields = std::vector<std::pair<std::string, Json>>;

Json length_only(const Outcome& r, double v) { return r.has_length ? Json(v) : Json(nullptr); }

// The strategy's knobs and its prices; every name present on every row (null where unknown), so
// CSV's columns and JSON's keys are the same.
Fields candidate_fields(const Outcome& r, const Candidate* c) {
  const auto v = [&](auto f) { return c ? Json(f(*c)) : Json(nullptr); };
  const auto len = [&](auto f) { return c ? length_only(r, f(*c)) : Json(nullptr); };
  return {{"strategy", v([](const Candidate& x) { return sweep::describe(x); })},
          {"tensor", v([](const Candidate& x) { return x.p.tensor; })},
          {"pipeline", v([](const Candidate& x) { return x.p.pipeline; })},
          {"data", v([](const Candidate& x) { return x.p.data; })},
          {"expert", v([](const Candidate& x) { return x.p.expert; })},
          {"context", v([](const Candidate& x) { return x.p.context; })},
          {"micro_batch_size", v([](const Candidate& x) { return x.p.micro_batch; })},
          {"pipeline_schedule", v([](const Candidate& x) { return strategies::to_string(x.p.schedule); })},
          {"virtual_stages", v([](const Candidate& x) { return x.p.virtual_stages; })},
          {"zero_stage", v([](const Candidate& x) { return x.p.zero_stage; })},
          {"recompute", v([](const Candidate& x) { return strategies::to_string(x.p.recompute); })},
          {"sequence_parallel", v([](const Candidate& x) { return x.p.sequence_parallel; })},
          {"precision", v([](const Candidate& x) { return sweep::precision_name(x.precision); })},
          {"step_time_s", v([](const Candidate& x) { return x.step; })},
          {"samples_per_s", v([](const Candidate& x) { return x.samples_per_s; })},
          {"mfu", v([](const Candidate& x) { return x.mfu; })},
          {"peak_bytes", v([](const Candidate& x) { return x.peak; })},
          {"capacity_bytes", v([](const Candidate& x) { return x.capacity; })},
          {"headroom_bytes", v([](const Candidate& x) { return sweep::headroom(x); })},
          {"price_per_gpu_hour_usd", v([](const Candidate& x) { return x.price; })},
          {"cost_per_million_tokens_usd", v([](const Candidate& x) { return x.cost_per_million_tokens; })},
          {"time_to_train_s", len([](const Candidate& x) { return x.time_to_train; })},
          {"days", len([](const Candidate& x) { return x.time_to_train / 86400; })},
          {"gpu_hours", len([](const Candidate& x) { return x.gpu_hours; })},
          {"energy_kwh", len([](const Candidate& x) { return x.energy_kwh; })},
          {"cost_usd", len([](const Candidate& x) { return x.cost; })},
          {"priced_by", v([](const Candidate& x) { return std::string(priced_by(x)); })},
          {"closed_form_step_time_s", c && c->estimate > 0 ? Json(c->estimate) : Json(nullptr)}};
}

Fields row_fields(const Outcome& r, const PlanRow& row) {
  Fields f{{"gpus", r.clusters[row.cluster].gpus}, {"device", r.clusters[row.cluster].device},
           {"rank", row.best ? Json(row.rank) : Json(nullptr)}};
  for (auto& kv : candidate_fields(r, row.best)) f.push_back(std::move(kv));
  f.emplace_back("folded", row.folded);
  f.emplace_back("none_because", row.best ? Json(nullptr) : Json(row.none_because));
  return f;
}

std::string csv_value(const Json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) return csv_field(v.get<std::string>());
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_float()) return fmt::format("{}", v.get<double>());
  if (v.is_array()) {
    std::string joined;
    for (const auto& x : v) joined.append(joined.empty() ? "" : "; ").append(x.get<std::string>());
    return csv_field(joined);
  }
  return v.dump();
}

void print_csv(const Outcome& r, const std::vector<PlanRow>& rows) {
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Fields f = row_fields(r, rows[i]);
    std::string line;
    if (i == 0) {
      for (const auto& [name, v] : f) line.append(line.empty() ? "" : ",").append(name);
      std::cout << line << "\r\n";
      line.clear();
    }
    for (std::size_t k = 0; k < f.size(); ++k) line.append(k ? "," : "").append(csv_value(f[k].second));
    std::cout << line << "\r\n";
  }
}

void print_json(const Outcome& r, const SweepOptions& o, const std::vector<PlanRow>& rows) {
  Json out = Json::array(), cl = Json::array(), why = Json::array(), replayed_because = Json::array();
  for (const auto& row : rows) {
    Json j = Json::object();
    for (auto& [name, v] : row_fields(r, row)) j[name] = std::move(v);
    out.push_back(std::move(j));
  }
  for (const auto& c : r.clusters) cl.push_back({{"gpus", c.gpus}, {"device", c.device}});
  for (const auto& [reason, n] : r.failures) why.push_back({{"reason", reason}, {"count", n}});
  for (const auto& [reason, n] : r.replayed_because) replayed_because.push_back({{"reason", reason}, {"count", n}});
  std::cout << Json{{"scenario", r.scenario.name}, {"clusters", cl}, {"by_cluster", true}, {"per_cluster", o.per_cluster},
                    {"rank_by", o.rank_by}, {"ranked_by", ranked_by(o.rank_by, r.has_length)},
                    {"limits", limits_json(limits_of(o))}, {"candidates", r.candidates.size()},
                    {"duplicates_dropped", r.duplicates}, {"evaluated", r.ranked.size()}, {"fitting", r.fitting},
                    {"within_limits", sweep::within_limits(r, limits_of(o)).size()}, {"failed", r.failed},
                    {"failures", why}, {"closed_form", r.closed_form}, {"replayed", r.replayed + r.confirmed},
                    {"confirmed", r.confirmed}, {"replayed_because", replayed_because}, {"rows", out}}
                   .dump(2)
            << "\n";
}

// A table row's cells, as people read them; "-" where the scenario gives no training length.
std::vector<std::string> text_cells(const Outcome& r, const PlanRow& row) {
  const auto& cl = r.clusters[row.cluster];
  if (!row.best) return {fmt::format("{}", cl.gpus), cl.device, "", row.none_because};
  const Candidate& c = *row.best;
  const auto len = [&](std::string s) { return r.has_length ? s : std::string("-"); };
  return {fmt::format("{}", cl.gpus),
          cl.device,
          fmt::format("{}", row.rank),
          sweep::describe(c),
          fmt::format("{:.4g} s", c.step),
          fmt::format("{:.1f}%", 100 * c.mfu),
          len(sweep::human_days(c.time_to_train)),
          len(sweep::human_number(c.gpu_hours)),
          len(sweep::human_energy(c.energy_kwh)),
          len(sweep::human_money(c.cost)),
          sweep::human_gib(c.peak),
          sweep::human_gib(sweep::headroom(c)),
          priced_by(c)};
}

void print_text(const Outcome& r, const SweepOptions& o, const std::vector<PlanRow>& rows, const std::string& none_fits) {
  print_text_header(r, o, none_fits);
  std::vector<std::vector<std::string>> table{
      {"gpus", "device", "#", "strategy", "step", "MFU", "time", "GPU-hours", "energy", "cost", "peak", "free", "priced by"}};
  for (const auto& row : rows) table.push_back(text_cells(r, row));
  std::vector<std::size_t> width(table[0].size(), 0);
  for (const auto& cells : table)
    if (cells.size() == width.size())  // a cluster without a plan spans the columns after its device
      for (std::size_t k = 0; k < cells.size(); ++k) width[k] = std::max(width[k], cells[k].size());
  width[0] = std::max(width[0], std::size_t{4}), width[1] = std::max(width[1], table[0][1].size());
  const std::size_t strategy_at = width[0] + width[1] + width[2] + 6;
  for (std::size_t i = 0; i < table.size(); ++i) {
    const auto& cells = table[i];
    std::string line;
    for (std::size_t k = 0; k < cells.size(); ++k) {
      const bool left = k == 1 || k == 3 || k == 12, last = k + 1 == cells.size();
      const std::string cell = last && left ? cells[k] : left ? fmt::format("{:<{}}", cells[k], width[k]) : fmt::format("{:>{}}", cells[k], width[k]);
      line.append(k ? "  " : "").append(cell);
    }
    std::cout << line << "\n";
    if (i > 0)
      for (const auto& name : rows[i - 1].folded) std::cout << std::string(strategy_at, ' ') << "= " << name << "\n";
  }
  if (std::any_of(rows.begin(), rows.end(), [](const PlanRow& row) { return !row.folded.empty(); }))
    std::cout << "(= : priced exactly as the row above, folded into it)\n";
  if (!none_fits.empty() || o.write_best.empty()) return;
  std::cout << fmt::format("\nwrote {} (the best of all clusters)\n", o.write_best);
}

}  // namespace

void print_plan(const Outcome& r, const SweepOptions& o, const std::string& none_fits) {
  const auto rows = sweep::plan_rows(r, limits_of(o), o.per_cluster);
  if (o.format == "csv") print_csv(r, rows);
  else if (o.format == "json") print_json(r, o, rows);
  else print_text(r, o, rows, none_fits);
}

}  // namespace dtsim::cli
