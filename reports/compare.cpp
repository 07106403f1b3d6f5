#include <fmt/format.h>

#include "reports/reports.hpp"

namespace dtsim::reports {

namespace {
const nlohmann::json* at(const nlohmann::json& j, const std::string& pointer) {
  nlohmann::json::json_pointer p(pointer);
  return j.contains(p) ? &j.at(p) : nullptr;
}
}  // namespace

Comparison compare(const nlohmann::json& base, const nlohmann::json& cand, double rel_tol) {
  Comparison c;
  struct Metric {
    const char* pointer;
    bool higher_is_worse;
  };
  for (const Metric& m : {Metric{"/step_time_s", true}, Metric{"/throughput/samples_per_s", false},
                          Metric{"/flops/mfu", false}, Metric{"/memory/peak_bytes", true}}) {
    const auto *b = at(base, m.pointer), *n = at(cand, m.pointer);
    if (!b || !n || !b->is_number() || !n->is_number()) continue;
    double bv = b->get<double>(), nv = n->get<double>();
    double change = bv != 0 ? (nv - bv) / bv : 0.0;
    bool worse = m.higher_is_worse ? change > rel_tol : change < -rel_tol;
    c.regression = c.regression || worse;
    c.lines.push_back(fmt::format("{:<28} {:>14.6g} -> {:<14.6g} {:+7.2f}%  {}", m.pointer, bv, nv, 100 * change,
                                  worse ? "REGRESSION" : "ok"));
  }
  const auto *bf = at(base, "/memory/fits"), *nf = at(cand, "/memory/fits");
  if (bf && nf && bf->is_boolean() && nf->is_boolean()) {
    bool worse = bf->get<bool>() && !nf->get<bool>();
    c.regression = c.regression || worse;
    c.lines.push_back(fmt::format("{:<28} {:>14} -> {:<14}          {}", "/memory/fits", bf->get<bool>(), nf->get<bool>(),
                                  worse ? "REGRESSION" : "ok"));
  }
  return c;
}

}  // namespace dtsim::reports
