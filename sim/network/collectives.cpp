#include "sim/network/collectives.hpp"
#include "sim/network/runs_as.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>

#include "sim/network/algorithm_registry.hpp"
#include "sim/network/algorithms.hpp"

namespace dtsim::network {

using taskgraph::Algorithm;
using taskgraph::CollectiveOp;

void Phase::add(const Phase& other) {
  const std::size_t offset = flows.size();
  flows.insert(flows.end(), other.flows.begin(), other.flows.end());
  for (const auto& c : other.chains) chains.push_back({c.first + offset, c.count});
  work.insert(work.end(), other.work.begin(), other.work.end());
  latency = std::max(latency, other.latency);
}

std::size_t LoweredCollective::flow_count() const {
  std::size_t n = 0;
  for (const auto& ph : phases) n += ph.flows.size();
  return n;
}

std::vector<Flow> LoweredCollective::all_flows() const {
  std::vector<Flow> out;
  for (const auto& ph : phases) out.insert(out.end(), ph.flows.begin(), ph.flows.end());
  return out;
}

namespace {

[[noreturn]] void unsupported(CollectiveOp op, Algorithm a) {
  throw std::invalid_argument(std::string(algorithm_name(a)) + " does not implement " + taskgraph::to_string(op));
}

// The bytes an algorithm's flows move for a collective of `bytes`.
double moved_bytes(const Platform& pf, CollectiveOp op, const AlgorithmUnit& unit, double bytes, const std::vector<int>& r) {
  // Inside one node, an all-reduce runs at NCCL's measured efficiency for its size: mid-size
  // buffers move as if they were larger.
  const bool one_node = std::all_of(r.begin(), r.end(), [&](int g) { return pf.node_of(g) == pf.node_of(r.front()); });
  if (op == CollectiveOp::AllReduce && !unit.on_servers() && one_node) bytes *= pf.intra_all_reduce_inflation(bytes);
  // Across nodes, all-reduce, all-gather and reduce-scatter run at the scenario's efficiency for
  // their size (without one, lower_fixed follows NCCL's tuning model).
  if (!one_node && (op == CollectiveOp::AllReduce || op == CollectiveOp::AllGather || op == CollectiveOp::ReduceScatter) &&
      !unit.on_servers())
    bytes *= pf.inter_inflation(bytes);
  return bytes;
}

// One byte's lowering, which every size's is scaled where the unit is linear.
LoweredCollective lower_unit(const Platform& pf, CollectiveOp op, Algorithm a, double bytes, const std::vector<int>& r) {
  if (op == CollectiveOp::SendRecv) {  // the same chain whatever the algorithm
    if (r.size() != 2) throw std::invalid_argument("send_recv needs a source and a destination");
    return algorithms::chain(pf, bytes, r, false);
  }
  if (const auto& unit = unit_of(a); unit.lower)
    if (auto lc = unit.lower(pf, op, bytes, r)) return std::move(*lc);
  unsupported(op, a);
}

LoweredCollective lower_algorithm(const Platform& pf, CollectiveOp op, Algorithm a, double bytes, const std::vector<int>& r) {
  if (r.size() < 2 || bytes <= 0) return {};
  bytes = moved_bytes(pf, op, unit_of(a), bytes, r);
  // On a torus a ring collective over every chip, or over the chips of a sub-torus (a group
  // along whole dimensions), runs ring by ring along each dimension it spans.
  const bool ring_op = op == CollectiveOp::AllReduce || op == CollectiveOp::ReduceScatter || op == CollectiveOp::AllGather;
  if (a == Algorithm::Ring && ring_op && pf.torus())
    if (const auto spanned = algorithms::torus_span(pf, r); !spanned.empty())
      return algorithms::torus_rings(pf, bytes, r, spanned, op != CollectiveOp::AllGather, op != CollectiveOp::ReduceScatter);
  return lower_unit(pf, op, a, bytes, r);
}

// A collective across nodes takes at least the time NCCL's tuning model predicts for it. The
// model's time is its own latency plus bytes at the protocol's bandwidth; dtsim's lowering already
// pays its step latencies, so only the rest is added, as bandwidth: the flows grow by k so that
// latency + k x (time at line rate - latency) = NCCL's time. Where dtsim is already slower (its
// per-step latency above NCCL's), nothing changes: the latency is not counted twice.
// `walked`: lc's analytical_times (its time, and without bytes) where the caller has them.
struct Walked {
  double total = 0, latency = 0;
};
// The factor on the flows' bytes (1: none).
double nccl_stretch(const nccl::Prediction& nccl, double total, double latency) {
  const double k = (nccl.time_us * 1e-6 - latency) / (total - latency);
  return total > latency && k > 1.0 ? k : 1.0;
}
LoweredCollective at_least_nccl(const Platform& pf, const std::optional<nccl::Prediction>& nccl, LoweredCollective lc,
                                const Walked* walked = nullptr) {
  if (!nccl) return lc;
  double latency = walked ? walked->latency : 0;
  const double total = walked ? walked->total : analytical_times(pf, lc, latency);
  const double k = nccl_stretch(*nccl, total, latency);
  if (k == 1.0) return lc;
  for (auto& ph : lc.phases)
    for (auto& f : ph.flows) f.bytes *= k;
  return lc;
}

// NCCL's prediction where its floor applies: every algorithm but the servers'. It depends on the
// collective, not on the algorithm, so one serves all of a collective's candidates.
std::optional<nccl::Prediction> floor_of(const Platform& pf, CollectiveOp op, Algorithm a, double bytes,
                                         const std::vector<int>& r) {
  if (unit_of(a).on_servers()) return std::nullopt;
  return nccl_prediction(pf, op, bytes, r);
}

// On NVLink SHARP nodes NCCL itself picks NVLS (inside a node) or an NVLS tree (across nodes)
// where its model predicts them fastest, whatever ring or auto would do: those run through the
// switches instead.
bool runs_nvls(const Platform& pf, Algorithm a, const std::optional<nccl::Prediction>& nccl) {
  return pf.spec().intra_nvls && pf.switch_endpoint(0) >= 0 && (a == Algorithm::Ring || a == Algorithm::Auto) && nccl &&
         (nccl->algo == nccl::Algo::Nvls || nccl->algo == nccl::Algo::NvlsTree);
}

LoweredCollective lower_fixed(const Platform& pf, CollectiveOp op, Algorithm a, double bytes, const std::vector<int>& r,
                              const std::optional<nccl::Prediction>& nccl) {
  if (runs_nvls(pf, a, nccl)) return at_least_nccl(pf, nccl, algorithms::nvls(pf, op, bytes, r));
  return at_least_nccl(pf, nccl, lower_algorithm(pf, op, a, bytes, r));
}

}  // namespace

std::optional<nccl::Prediction> nccl_prediction(const Platform& pf, CollectiveOp op, double bytes, const std::vector<int>& r) {
  const auto& c = pf.spec();
  if (c.nccl_gpu == nccl::Gpu::None || !c.inter_efficiency_points.empty() || pf.torus() || r.size() < 2 || bytes <= 0 ||
      (op != CollectiveOp::AllReduce && op != CollectiveOp::AllGather && op != CollectiveOp::ReduceScatter))
    return std::nullopt;
  // GPUs of the group on each node (all 0 between calls), the nodes it spans and the most on one.
  thread_local std::vector<int> per_node;
  if (per_node.size() < static_cast<std::size_t>(c.nodes)) per_node.resize(static_cast<std::size_t>(c.nodes), 0);
  int nodes = 0, widest = 0;
  for (int g : r) {
    int& n = per_node[static_cast<std::size_t>(pf.node_of(g))];
    nodes += n++ == 0 ? 1 : 0;
    widest = std::max(widest, n);
  }
  for (int g : r) per_node[static_cast<std::size_t>(pf.node_of(g))] = 0;
  // Inside one node only where NCCL may run NVLS: elsewhere the node's measured efficiency holds.
  if (nodes < 2 && !c.intra_nvls) return std::nullopt;
  return nccl::predict(nccl_setup(c, static_cast<int>(r.size()), nodes, widest), op, bytes);
}

nccl::Setup nccl_setup(const ClusterSpec& c, int ranks, int nodes, int widest) {
  nccl::Setup s;
  s.gpu = c.nccl_gpu;
  s.cpu = c.nccl_cpu;
  s.ranks = ranks;
  s.nodes = nodes;
  s.nics = std::max(1, std::min(c.nics_per_node, widest));  // as algorithms::ring's channels
  s.nic_GBps = c.nic_bandwidth / 1e9;
  s.nvlink = c.fabric != Fabric::Pcie;
  s.nvls = c.intra_nvls;
  // NVLink links per GPU: 25 GB/s per direction each up to NVLink 4, 50 from NVLink 5 (Blackwell).
  s.nvlinks = std::max(1, static_cast<int>(std::lround(c.intra_bandwidth / (c.nccl_gpu >= nccl::Gpu::Blackwell ? 50e9 : 25e9))));
  return s;
}

namespace {

// Auto's all-reduce candidates, in the order a tie keeps the first.
constexpr Algorithm kAutoAllReduce[] = {Algorithm::Ring, Algorithm::Tree, Algorithm::Hierarchical};

// Auto: the candidate the network model predicts fastest, with its lowering.
std::pair<Algorithm, LoweredCollective> resolve(const Platform& pf, CollectiveOp op, Algorithm a, double bytes,
                                                const std::vector<int>& ranks) {
  const auto nccl = floor_of(pf, op, a, bytes, ranks);
  if (a != Algorithm::Auto) return {a, lower_fixed(pf, op, a, bytes, ranks, nccl)};
  if (runs_nvls(pf, a, nccl)) return {Algorithm::Auto, lower_fixed(pf, op, a, bytes, ranks, nccl)};
  if (op == CollectiveOp::AllToAll) return {Algorithm::Direct, lower_fixed(pf, op, Algorithm::Direct, bytes, ranks, nccl)};
  if (op != CollectiveOp::AllReduce || pf.torus()) return {Algorithm::Ring, lower_fixed(pf, op, Algorithm::Ring, bytes, ranks, nccl)};
  // Chosen on dtsim's own times: NCCL's floor would make the candidates tie. Each walked once
  // for both of the floor's times.
  std::pair<Algorithm, LoweredCollective> best{kAutoAllReduce[0], lower_algorithm(pf, op, kAutoAllReduce[0], bytes, ranks)};
  Walked best_t;
  best_t.total = analytical_times(pf, best.second, best_t.latency);
  for (Algorithm c : std::span(kAutoAllReduce).subspan(1)) {
    auto lc = lower_algorithm(pf, op, c, bytes, ranks);
    Walked t;
    t.total = analytical_times(pf, lc, t.latency);
    if (t.total < best_t.total) best = {c, std::move(lc)}, best_t = t;
  }
  best.second = at_least_nccl(pf, nccl, std::move(best.second), &best_t);
  return best;
}

}  // namespace

std::vector<Algorithm> sized_candidates(const Platform& pf, CollectiveOp op, Algorithm a, const std::vector<int>& ranks) {
  if (pf.torus() || ranks.size() < 2 || op == CollectiveOp::SendRecv) return {};
  std::vector<Algorithm> out;
  if (a != Algorithm::Auto) out = {a};
  else if (op == CollectiveOp::AllToAll) out = {Algorithm::Direct};
  else if (op != CollectiveOp::AllReduce) out = {Algorithm::Ring};
  else out.assign(std::begin(kAutoAllReduce), std::end(kAutoAllReduce));
  for (Algorithm c : out)
    if (!unit_of(c).linear) return {};
  return out;
}

LoweredCollective lower_one_byte(const Platform& pf, CollectiveOp op, Algorithm candidate, const std::vector<int>& ranks) {
  return lower_unit(pf, op, candidate, 1.0, ranks);
}

// As resolve() and lower(), on lines: the candidate fastest at this size, then NCCL's floor.
std::optional<double> sized_time(const Platform& pf, CollectiveOp op, Algorithm a, double bytes, const std::vector<int>& ranks,
                                 const std::vector<TimeLines>& lines, double launch) {
  if (!(bytes > 0) || lines.empty()) return std::nullopt;
  const auto nccl = floor_of(pf, op, a, bytes, ranks);
  if (runs_nvls(pf, a, nccl)) return std::nullopt;
  const double moved = moved_bytes(pf, op, unit_of(a), bytes, ranks);
  std::size_t best = 0;
  double total = lines[0].at(moved);
  for (std::size_t i = 1; i < lines.size(); ++i)
    if (const double t = lines[i].at(moved); t < total) best = i, total = t;
  if (nccl) {
    const double k = nccl_stretch(*nccl, total, lines[best].at(0.0));
    if (k != 1.0) total = lines[best].at(moved * k);
  }
  return total + (lines[best].phases.empty() ? 0.0 : launch);
}

Algorithm choose(const Platform& pf, CollectiveOp op, Algorithm a, double bytes, const std::vector<int>& ranks) {
  return resolve(pf, op, a, bytes, ranks).first;
}

LoweredCollective lower(const Platform& pf, CollectiveOp op, Algorithm a, double bytes, const std::vector<int>& ranks) {
  return resolve(pf, op, a, bytes, ranks).second;
}

std::string runs_as(const Platform& pf, CollectiveOp op, Algorithm a, double bytes, const std::vector<int>& ranks) {
  const auto nccl = floor_of(pf, op, a, bytes, ranks);
  if (runs_nvls(pf, a, nccl)) return nccl::to_string(nccl->algo);
  std::string out = algorithm_name(resolve(pf, op, a, bytes, ranks).first);
  if (nccl) out += std::string(" (NCCL model: ") + nccl::to_string(nccl->algo) + "/" + nccl::to_string(nccl->proto) + ")";
  return out;
}

void GroupMerge::add(const LoweredCollective& one) {
  if (one.phases.size() > merged_.size()) {
    merged_.resize(one.phases.size());
    chained_.resize(one.phases.size());
  }
  for (std::size_t k = 0; k < one.phases.size(); ++k) {
    const auto& ph = one.phases[k];
    auto& to = chained_[k];
    std::vector<char> in_chain(ph.flows.size(), 0);
    for (const auto& ch : ph.chains) {
      to.chains.push_back({to.flows.size(), ch.count});
      to.flows.insert(to.flows.end(), ph.flows.begin() + static_cast<std::ptrdiff_t>(ch.first),
                      ph.flows.begin() + static_cast<std::ptrdiff_t>(ch.first + ch.count));
      std::fill_n(in_chain.begin() + static_cast<std::ptrdiff_t>(ch.first), ch.count, 1);
    }
    for (std::size_t i = 0; i < ph.flows.size(); ++i)
      if (!in_chain[i]) merged_[k][{ph.flows[i].src, ph.flows[i].dst}] += ph.flows[i].bytes;
    to.work.insert(to.work.end(), ph.work.begin(), ph.work.end());
    to.latency = std::max(to.latency, ph.latency);
  }
}

LoweredCollective GroupMerge::done() {
  LoweredCollective out;
  out.phases.resize(merged_.size());
  for (std::size_t k = 0; k < merged_.size(); ++k) {
    for (const auto& [route, b] : merged_[k]) out.phases[k].flows.push_back({route.first, route.second, b});
    out.phases[k].add(chained_[k]);
  }
  merged_.clear();
  chained_.clear();
  return out;
}

namespace {
LoweredCollective lower_groups(const Platform& pf, const taskgraph::Collective& c, const std::vector<std::vector<int>>& groups) {
  if (c.only >= 0) {
    if (groups.size() != 1 || c.op != CollectiveOp::AllReduce || c.bytes <= 0) throw std::invalid_argument("bad asynchronous update");
    const auto update = unit_of(c.algorithm).lower_async;
    if (!update) unsupported(c.op, c.algorithm);
    return update(pf, c.bytes, groups[0], c.only, c.server_apply_factor);
  }
  if (groups.size() == 1) return lower(pf, c.op, c.algorithm, c.bytes, groups[0]);
  GroupMerge merge;
  for (const auto& g : groups) merge.add(lower(pf, c.op, c.algorithm, c.bytes, g));
  return merge.done();
}
}  // namespace

LoweredCollective lower(const Platform& pf, const taskgraph::Collective& c, const std::vector<std::vector<int>>& groups) {
  auto out = lower_groups(pf, c, groups);
  if (c.launch_s > 0 && !out.phases.empty()) out.phases.front().latency += c.launch_s;
  return out;
}

LoweredCollective lower_host_copy(const Platform& pf, double bytes, const std::vector<int>& gpus, bool to_host) {
  LoweredCollective out;
  if (bytes <= 0 || gpus.empty()) return out;
  auto& ph = out.phases.emplace_back();
  for (int g : gpus) {
    const int dev = pf.pcie_endpoint(g), host = pf.host_endpoint(pf.node_of(g));
    ph.flows.push_back(to_host ? Flow{dev, host, bytes} : Flow{host, dev, bytes});
  }
  return out;
}

double inline_time(const Platform& pf, const taskgraph::InlineCollective& c, const std::vector<int>& ranks) {
  // An overlapped expert all-to-all runs inline: direct, as its tasks do (Experts::all_to_all).
  const Algorithm a = c.op == CollectiveOp::AllToAll ? Algorithm::Direct : Algorithm::Ring;
  return c.count * analytical_time(pf, lower(pf, c.op, a, c.bytes, ranks));
}

double ring_all_reduce_closed_form(int p, double bytes, double alpha, double bandwidth) {
  if (p < 2) return 0;
  return 2.0 * (p - 1) * (alpha + bytes / (p * bandwidth));
}

double bus_bandwidth_factor(CollectiveOp op, int p) {
  const double n = p;
  switch (op) {
    case CollectiveOp::AllReduce: return 2.0 * (n - 1) / n;
    case CollectiveOp::ReduceScatter:
    case CollectiveOp::AllGather:
    case CollectiveOp::AllToAll: return (n - 1) / n;
    default: return 1.0;
  }
}

}  // namespace dtsim::network
