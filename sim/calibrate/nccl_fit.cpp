#include "sim/calibrate/nccl_fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include "sim/calibrate/least_squares.hpp"
#include "sim/calibrate/text_input.hpp"
#include "sim/core/errors.hpp"
#include "sim/network/collectives.hpp"
#include "sim/network/runs_as.hpp"

namespace dtsim::calibrate {

using taskgraph::Algorithm;
using taskgraph::CollectiveOp;

const char* to_string(Tier t) { return t == Tier::IntraNode ? "intra_node" : "inter_node"; }

Placement place(const network::ClusterSpec& cluster, const NcclTestsFile& f) {
  if (f.ranks() < 2) throw InputError(f.path, "", "one rank: nothing crosses a link, so there is nothing to fit");
  std::map<std::string, std::pair<int, int>> nodes;  // host -> (node, ranks so far)
  Placement p;
  for (const auto& host : f.host_of_rank) {
    auto [it, fresh] = nodes.emplace(host, std::pair<int, int>{static_cast<int>(nodes.size()), 0});
    if (it->second.second == cluster.gpus_per_node)
      throw InputError(f.path, "", fmt::format("host {} ran more than {} ranks, the GPUs of a node of the base cluster \"{}\"", host,
                                               cluster.gpus_per_node, cluster.name));
    p.gpus.push_back(it->second.first * cluster.gpus_per_node + it->second.second++);
  }
  p.nodes = static_cast<int>(nodes.size());
  return p;
}

namespace {
// The algorithm `dtsim collective` runs each operation with by default: NCCL's all-to-all sends
// to every peer at once; the others run as rings (broadcast and reduce as ring chains).
Algorithm algorithm_for(CollectiveOp op) { return op == CollectiveOp::AllToAll ? Algorithm::Direct : Algorithm::Ring; }
}  // namespace

double collective_seconds(const network::ClusterSpec& cluster, const NcclTestsFile& f, const Placement& p, double bytes) {
  network::ClusterSpec c = cluster;
  c.nodes = p.nodes;
  const network::Platform pf(c);
  if (f.op == CollectiveOp::SendRecv) {
    std::vector<std::vector<int>> pairs;
    for (std::size_t r = 0; r < p.gpus.size(); ++r) pairs.push_back({p.gpus[r], p.gpus[(r + 1) % p.gpus.size()]});
    const taskgraph::Collective col{CollectiveOp::SendRecv, Algorithm::Ring, {}, bytes};
    return network::analytical_time(pf, network::lower(pf, col, pairs));
  }
  return network::analytical_time(pf, network::lower(pf, f.op, algorithm_for(f.op), bytes, p.gpus));
}

namespace {

// Enough for every fit seen (alpha-beta prices take 2 solves, NCCL's steps about 10).
constexpr int kMaxSolves = 30;

// The tier's two unknowns as least squares sees them: latency (s) and 1/bandwidth (s/B).
std::array<double, 2> unknowns(const network::ClusterSpec& c, Tier t) {
  return t == Tier::IntraNode ? std::array<double, 2>{c.intra_latency, 1.0 / c.intra_bandwidth}
                              : std::array<double, 2>{c.inter_latency, 1.0 / c.nic_bandwidth};
}
void set_unknowns(network::ClusterSpec& c, Tier t, const std::array<double, 2>& x) {
  (t == Tier::IntraNode ? c.intra_latency : c.inter_latency) = x[0];
  (t == Tier::IntraNode ? c.intra_bandwidth : c.nic_bandwidth) = 1.0 / x[1];
}

struct Observation {
  const NcclTestsFile* file;
  const Placement* placement;
  double bytes, measured_s;
};

// The model's time for each observation with the tier's unknowns at x.
std::vector<double> times(network::ClusterSpec c, Tier t, const std::array<double, 2>& x, const std::vector<Observation>& obs) {
  set_unknowns(c, t, x);
  std::vector<double> out;
  for (const auto& o : obs) out.push_back(collective_seconds(c, *o.file, *o.placement, o.bytes));
  return out;
}

double relative_ss(const std::vector<double>& model, const std::vector<Observation>& obs) {
  double ss = 0;
  for (std::size_t i = 0; i < obs.size(); ++i) ss += std::pow(model[i] / obs[i].measured_s - 1, 2);
  return ss;
}

}  // namespace

namespace {

// The model linearised at x: each row's relative residual as a0 x0 + a1 x1 - rhs, from the
// slopes of its time in each unknown (forward differences of 0.1 %: exact where the time is
// linear, as alpha-beta prices are). `moves` says which unknowns change some row by 0.1 % or
// more when they double: the others are not identifiable from these rows.
struct Linearised {
  std::vector<Equation> rows;
  std::array<bool, 2> moves{false, false};
};

Linearised linearise(const network::ClusterSpec& c, Tier t, const std::array<double, 2>& x, const std::vector<Observation>& obs) {
  const std::vector<double> at = times(c, t, x, obs);
  std::array<std::vector<double>, 2> stepped;
  std::array<double, 2> h{};
  for (int j = 0; j < 2; ++j) {
    auto y = x;
    h[j] = j == 0 ? std::max(x[0] * 1e-3, 1e-9) : x[1] * 1e-3;  // a zero latency still gets a slope
    y[j] += h[j];
    stepped[j] = times(c, t, y, obs);
  }
  Linearised out;
  for (std::size_t i = 0; i < obs.size(); ++i) {
    const double m = obs[i].measured_s;
    const double d0 = (stepped[0][i] - at[i]) / h[0], d1 = (stepped[1][i] - at[i]) / h[1];
    out.rows.push_back({d0 / m, d1 / m, (m - at[i] + d0 * x[0] + d1 * x[1]) / m});
    out.moves[0] = out.moves[0] || std::fabs(d0) * std::max(x[0], 1e-6) > 1e-3 * at[i];
    out.moves[1] = out.moves[1] || std::fabs(d1) * x[1] > 1e-3 * at[i];
  }
  return out;
}

// As the profile writes them (6 significant digits), so that every point tried is one a profile
// can hold: rounding the answer afterwards could cross a step of the model (NCCL's link count).
std::array<double, 2> representable(const std::array<double, 2>& x) { return {rounded(x[0]), 1.0 / rounded(1.0 / x[1])}; }

// From x toward the solve's answer, halving the step while the true model fits worse.
std::array<double, 2> damped(const network::ClusterSpec& c, Tier t, const std::array<double, 2>& x, std::array<double, 2> next,
                             const std::vector<Observation>& obs) {
  const double now = relative_ss(times(c, t, x, obs), obs);
  for (int k = 0; k < 20; ++k) {
    const auto candidate = representable(next);
    if (relative_ss(times(c, t, candidate, obs), obs) <= now) return candidate;
    for (int j = 0; j < 2; ++j) next[j] = 0.5 * (next[j] + x[j]);
  }
  return x;
}

TierFit fit_tier(network::ClusterSpec& c, Tier t, const std::vector<Observation>& obs) {
  TierFit fit;
  fit.tier = t;
  fit.rows = static_cast<int>(obs.size());
  auto x = unknowns(c, t);
  fit.base_latency_s = x[0];
  fit.base_bandwidth = 1.0 / x[1];
  x = representable(x);
  const std::array<double, 2> held = x;
  for (fit.solves = 1; fit.solves <= kMaxSolves; ++fit.solves) {
    const Linearised lin = linearise(c, t, x, obs);
    Bounds b;
    b.min = {0.0, 1e-15};  // bandwidth up to 1 PB/s, units::physical_span
    if (!lin.moves[0]) b.fixed[0] = held[0];
    if (!lin.moves[1]) b.fixed[1] = held[1];
    if (lin.moves[0] && lin.moves[1] && !separable(lin.rows)) b.fixed[0] = held[0];
    fit.latency_fitted = !b.fixed[0];
    fit.bandwidth_fitted = !b.fixed[1];
    const auto next = fit.latency_fitted || fit.bandwidth_fitted ? solve(lin.rows, b) : std::nullopt;
    if (!next) break;
    const auto step = damped(c, t, x, *next, obs);
    const bool still = std::fabs(step[0] - x[0]) <= 1e-9 * std::max(x[0], 1e-9) && std::fabs(step[1] - x[1]) <= 1e-9 * x[1];
    x = step;
    if (still) break;
  }
  set_unknowns(c, t, x);
  fit.latency_s = x[0];
  fit.bandwidth = 1.0 / x[1];
  fit.solves = std::min(fit.solves, kMaxSolves);
  return fit;
}

// Why a tier's value was kept, for the report.
void explain(TierFit& f, const std::vector<Observation>& obs) {
  const bool one_size = std::all_of(obs.begin(), obs.end(), [&](const Observation& o) { return o.bytes == obs.front().bytes; });
  if (!f.latency_fitted && !f.bandwidth_fitted)
    f.note = "neither value changes these rows' predicted times (the cluster's NCCL floor or another tier prices them): both kept";
  else if (!f.latency_fitted)
    f.note = one_size ? "one message size cannot separate latency from bandwidth: latency kept"
                      : "latency does not change these rows' predicted times by 0.1 % (or cannot be told from bandwidth): kept";
  else if (!f.bandwidth_fitted)
    f.note = "bandwidth does not change these rows' predicted times by 0.1 %: kept";
}

}  // namespace

namespace {
// What the file's largest row runs as in dtsim on `cluster`, in words (network::runs_as).
std::string runs_as(const network::ClusterSpec& cluster, const NcclTestsFile& f, const Placement& p) {
  if (f.op == CollectiveOp::SendRecv) return "a chain from each rank to the next";
  network::ClusterSpec c = cluster;
  c.nodes = p.nodes;
  const network::Platform pf(c);
  double largest = 0;
  for (const auto& r : f.rows) largest = std::max(largest, r.size);
  return network::runs_as(pf, f.op, algorithm_for(f.op), largest, p.gpus);
}
}  // namespace

CollectiveFit fit_collectives(const network::ClusterSpec& base, const std::vector<NcclTestsFile>& files) {
  if (!base.torus_dims.empty())
    throw InputError("", "--base-cluster", fmt::format("\"{}\" is a torus: its chip-to-chip links are not the node and NIC tiers "
                                                       "calibrate fits", base.name));
  std::vector<Placement> placed;
  CollectiveFit out;
  out.cluster = base;
  for (const auto& f : files) {
    placed.push_back(place(base, f));
    out.runs_as.push_back(runs_as(base, f, placed.back()));
  }
  for (Tier t : {Tier::IntraNode, Tier::InterNode}) {
    std::vector<Observation> obs;
    bool nccl_priced = false;
    for (std::size_t i = 0; i < files.size(); ++i) {
      if ((placed[i].nodes > 1) != (t == Tier::InterNode)) continue;
      for (const auto& r : files[i].rows) obs.push_back({&files[i], &placed[i], r.size, r.time_us * 1e-6});
      nccl_priced = nccl_priced || out.runs_as[i].find("nvls") != std::string::npos || out.runs_as[i].find("NCCL") != std::string::npos;
    }
    if (obs.empty()) continue;
    TierFit fit = fit_tier(out.cluster, t, obs);
    explain(fit, obs);
    if (nccl_priced)
      fit.note += std::string(fit.note.empty() ? "" : "; ") +
                  "some rows are priced by NCCL's tuning model (NVLS, or its floor under a collective across nodes), which reads "
                  "the bandwidth only through its link count: read this tier's values as bounds, not measurements";
    out.tiers.push_back(fit);
  }
  for (std::size_t i = 0; i < files.size(); ++i)
    for (const auto& r : files[i].rows)
      out.rows.push_back({i, r.line, r.size, r.time_us * 1e-6, collective_seconds(base, files[i], placed[i], r.size),
                          collective_seconds(out.cluster, files[i], placed[i], r.size)});
  return out;
}

}  // namespace dtsim::calibrate
