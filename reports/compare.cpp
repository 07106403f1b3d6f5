#include <fmt/format.h>

#include <cmath>

#include "reports/reports.hpp"
#include "sim/core/errors.hpp"

namespace dtsim::reports {

namespace {
const nlohmann::json* at(const nlohmann::json& j, const std::string& pointer) {
  nlohmann::json::json_pointer p(pointer);
  return j.contains(p) ? &j.at(p) : nullptr;
}

std::string kind(const nlohmann::json& j) {
  if (j.is_array()) return "an array";
  if (j.is_string()) return "a string";
  if (j.is_boolean()) return "a boolean";
  if (j.is_null()) return "null";
  if (j.is_number()) return "a number";
  return "an object";
}

}  // namespace

void check_result(const nlohmann::json& j, const std::string& file) {
  if (!j.is_object()) throw InputError(file, "", "not a dtsim result: expected a JSON object, found " + kind(j));
  if (!j.contains("step_time_s"))
    throw InputError(file, "/step_time_s", "missing: not a result of `dtsim run` (its result.json has it)");
  for (const MetricInfo& m : known_metrics())
    if (const auto* v = at(j, m.pointer)) {
      if (!v->is_number() || !std::isfinite(v->get<double>()) || v->get<double>() < 0)
        throw InputError(file, m.pointer, "expected a finite number >= 0, found " + (v->is_number() ? v->dump() : kind(*v)));
    }
  if (const auto* f = at(j, "/memory/fits"); f && !f->is_boolean())
    throw InputError(file, "/memory/fits", "expected true or false, found " + kind(*f));
}

// Every configuration value that differs (the name, the model, how it was trained and split),
// each with its full pointer: a bf16 and an fp8 run differ by more than their names.
std::vector<Difference> scenario_differences(const nlohmann::json& base, const nlohmann::json& cand) {
  std::vector<Difference> out;
  for (const char* pointer : {"/scenario", "/model", "/training", "/parallelism"}) {
    const auto *b = at(base, pointer), *c = at(cand, pointer);
    if (!b || !c || *b == *c) continue;
    if (!b->is_object() || !c->is_object()) {
      out.push_back({pointer, b->dump(), c->dump()});
      continue;
    }
    // diff()'s paths are relative; a replaced array or object counts once.
    for (const auto& op : nlohmann::json::diff(*b, *c)) {
      const nlohmann::json::json_pointer rel(op["path"].get<std::string>());
      const auto shown = [&](const nlohmann::json& j) { return j.contains(rel) ? j.at(rel).dump() : std::string("(absent)"); };
      out.push_back({pointer + rel.to_string(), shown(*b), shown(*c)});
    }
  }
  return out;
}

Comparison compare(const nlohmann::json& base, const nlohmann::json& cand, const Tolerances& tol) {
  Comparison c;
  for (const MetricInfo& m : known_metrics()) {
    if (!m.compared_by_default && !tol.by_pointer.contains(m.pointer)) continue;
    const auto *b = at(base, m.pointer), *n = at(cand, m.pointer);
    if (!b || !n || !b->is_number() || !n->is_number()) continue;
    MetricResult r{m.name, m.pointer, b->get<double>(), n->get<double>()};
    r.change = r.baseline != 0 ? (r.candidate - r.baseline) / r.baseline : 0.0;
    r.tolerance = tol.of(m.pointer);
    r.regression = m.higher_is_worse ? r.change > r.tolerance : r.change < -r.tolerance;
    c.lines.push_back(fmt::format("{:<28} {:>14.6g} -> {:<14.6g} {:+7.2f}% (tol {:g}%)  {}", m.pointer, r.baseline, r.candidate,
                                  100 * r.change, 100 * r.tolerance, r.regression ? "REGRESSION" : "ok"));
    c.metrics.push_back(r);
  }
  const auto *bf = at(base, "/memory/fits"), *nf = at(cand, "/memory/fits");
  if (bf && nf && bf->is_boolean() && nf->is_boolean()) {
    MetricResult r{"memory.fits", "/memory/fits", double(bf->get<bool>()), double(nf->get<bool>())};
    r.is_flag = true;
    r.regression = bf->get<bool>() && !nf->get<bool>();
    c.lines.push_back(fmt::format("{:<28} {:>14} -> {:<14}                     {}", "/memory/fits", bf->get<bool>(), nf->get<bool>(),
                                  r.regression ? "REGRESSION" : "ok"));
    c.metrics.push_back(r);
  }
  for (const auto& r : c.metrics) c.regression = c.regression || r.regression;
  return c;
}

}  // namespace dtsim::reports
