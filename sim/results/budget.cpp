#include "sim/results/budget.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <unordered_map>

#include "sim/core/errors.hpp"
#include "sim/network/algorithm_registry.hpp"
#include "sim/replay/dispatch.hpp"
#include "sim/results/closed_form.hpp"
#include "strategies/buckets.hpp"
#include "strategies/layout.hpp"
#include "strategies/unit.hpp"

namespace dtsim::results {

using config::Backend;
using taskgraph::Algorithm;
using taskgraph::CollectiveOp;

namespace {

// One member's asynchronous push and pull against every server shard (or host memory) of a
// group of `group`: as the algorithm counts it, else one push and one pull.
network::FlowBound async_update_flows(const network::ClusterSpec& c, Algorithm a, double group) {
  const auto count = network::unit_of(a).async_flows;
  if (!count) return {2, 1, false};
  const auto n = count(c, group);
  return {n.flows, n.widest, n.chained};
}

// Unit costs measured on this project's 2-core machine (docs/safety.md, "Input limits"), rounded up.
// Planning and replaying a task: the 1T validation row, 195k tasks, takes 1.4 s on SimGrid, 0.8 s
// to plan alone; about 600 bytes each.
constexpr double kTaskSeconds[] = {7e-6, 5e-6};  // simgrid, analytical
constexpr double kTaskBytes = 600;
// A SimGrid flow: ring-like chains 1.5 us plus 10 ps per flow in flight (GPT-2 data parallel on
// 16k GPUs: 2.7 us a flow, on 64k: 6.3 us); independent flows 2 us plus 8 ns per flow in flight,
// as SimGrid's solver shares links among all of them (parameter servers, 2,048 in flight: 13 us;
// a direct all-reduce on 128 GPUs, 16,384: 100-200 us, on 256 GPUs over 100 s in all). The
// analytical replay prices each distinct collective once, about 0.5 us per flow (GPT-2 on 1M GPUs:
// 50 million flows in 19 s).
double flow_seconds(const network::FlowBound& b, Backend backend) {
  if (backend == Backend::Analytical) return 0.5e-6;
  return b.chained ? 1.5e-6 + 1e-11 * b.widest : 2e-6 + 8e-9 * b.widest;
}
// Lowering keeps a collective's flows, their routes and a map entry each: about 200 bytes a flow.
constexpr double kLoweredFlowBytes = 200;
// SimGrid's hosts, links and routes: about 10 KB per GPU (64k GPUs: 0.8 GB) and 40 us to build
// (Llama 3 70B on 16k GPUs: 0.9 s for 220 tasks and 90k flows). The analytical platform: a few
// links per GPU.
constexpr double kGpuBytes[] = {10e3, 300};
constexpr double kGpuSeconds[] = {40e-6, 1e-6};
constexpr double kBaseBytes = 40e6;

int index(Backend b) { return b == Backend::SimGrid ? 0 : 1; }
const char* name(Backend b) { return b == Backend::SimGrid ? "simgrid" : "analytical"; }

// The collectives a plan holds, counted from the scenario (strategies/plan.cpp and
// plan_updates.cpp): their flows and modelled replay time.
struct Tally {
  const network::ClusterSpec& cluster;
  Backend backend;
  double flows = 0, seconds = 0, widest = 0;
  void add(CollectiveOp op, Algorithm a, double p, double groups, double per_node, double count) {
    if (count <= 0) return;
    // The analytical replay lowers each distinct collective once; how many of a kind are distinct
    // is only known once planned (check_plan_budget), so count one here.
    if (backend == Backend::Analytical) count = 1;
    const auto b = network::flow_bound(cluster, op, a, p, groups, per_node);
    flows += count * b.flows;
    widest = std::max(widest, b.flows);
    seconds += collective_seconds(b, count, backend);
  }
};

std::string millions(double n) {
  return n >= 1e6 ? fmt::format("{:.1f} million", n / 1e6) : with_commas(n);
}

}  // namespace

std::string with_commas(double n) {
  std::string digits = fmt::format("{:.0f}", n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

double collective_seconds(const network::FlowBound& b, double count, Backend backend) {
  return count * b.flows * flow_seconds(b, backend);
}

SliceFacts slice_facts(const config::Scenario& s) {
  const auto& p = s.parallelism;
  // One tensor rank's slice of the op graph (at most 10,000 blocks, so cheap to build): the
  // planner's units count over its layers as they would over the planned model's.
  models::BuildOptions slice;
  slice.tensor = p.tensor;
  slice.sequence_parallel = p.sequence_parallel;
  slice.expert = p.expert;
  slice.expert_tensor = p.expert_tensor;
  SliceFacts f;
  f.graph = std::make_shared<const models::ModelGraph>(s.model.build(slice));
  return f;
}

Estimate estimate(const config::Scenario& s, Backend backend, bool replay) { return estimate(s, backend, replay, slice_facts(s)); }

namespace {

// What the planner's emitter and its mechanism units (strategies/unit.hpp) count with: the
// scenario laid out over the slice as the planner lays it out (an impossible split leaves the
// chunks empty: planning refuses it), and the units the strategy uses.
struct Counting {
  strategies::Layout layout;
  std::vector<std::unique_ptr<strategies::Unit>> units;
  std::vector<double> stage_buckets;
  strategies::Count count;
  Counting(const config::Scenario& s, const SliceFacts& facts)
      : layout(strategies::layout_of(s.parallelism, s.training)),
        units(strategies::make_units(s.parallelism)),
        count{layout, s.parallelism, s.training, {}, false, facts.graph.get(), nullptr} {
    try {
      layout.chunk_layers = strategies::split_chunks(*facts.graph, layout.chunks, s.parallelism.stage_blocks);
      layout.checkpoints = strategies::Checkpoints(s.parallelism, layout.chunk_layers, layout.pipeline);
    } catch (const std::exception&) {
      layout.chunk_layers.assign(static_cast<std::size_t>(layout.chunks), {});
    }
    count.joined = strategies::replicas_join(layout, s.parallelism);
    for (const auto& u : units) count.units.push_back(u.get());
    count_buckets(s, facts);
  }
  // The same layout of the same slice fills the same buckets: counted once per sweep.
  void count_buckets(const config::Scenario& s, const SliceFacts& facts) {
    if (s.parallelism.fusion.on()) return;  // cut by the layers' ready times, not by caps: sync_buckets counts them
    const auto caps = strategies::sync_caps(s.parallelism, s.training.precision);
    for (int st = 0; st < layout.pipeline; ++st) {
      auto [it, fresh] = facts.buckets->try_emplace({layout.chunks, layout.pipeline, st, s.parallelism.stage_blocks, caps}, 0.0);
      if (fresh)
        it->second = static_cast<double>(
            strategies::make_buckets(layout.stage_layers(st), caps.grad_bytes, caps.cap, caps.first_cap, caps.which).size());
      stage_buckets.push_back(it->second);
    }
    count.stage_buckets = &stage_buckets;
  }
};

// Tasks of one step, as each emits them: the emitter's every pass (split per layer where a unit
// asks), the sends between stages and the receiving tensor group's gathers, zero-bubble's W
// passes, PipeDream's updates, the gradient buckets, the tied embedding's sum and the optimizer
// steps; the units' loads, ZeRO's collectives, a framework's ZeRO-3, offload's copies and host
// step, priority order's updates, asynchronous exchanges, expert parallelism's MoE passes.
double step_tasks(const Counting& k) {
  double tasks = strategies::pass_tasks(k.count) + strategies::step_tasks(k.count);
  for (const auto* u : k.count.units) tasks += u->tasks(k.count);
  return tasks;
}

// How a kind of group sits on the cluster: its ranks, how many such groups one collective names,
// and how many of a group's ranks share a node.
struct Geometry {
  double ranks = 1, groups = 1, per_node = 1;
};
// How many of `members` ranks `stride` stage ranks apart share a node, the stage's ranks being
// blocks of T contiguous GPUs (tensor, then context ranks) `dp_stride` GPUs apart: the expert grid's groups.
double folded_per_node(double members, double stride, double T, double dp_stride, double gpus_per_node) {
  if (stride >= T) return std::clamp(std::floor(gpus_per_node / (dp_stride * stride / T)), 1.0, members);
  return std::clamp(T / stride * std::max(1.0, std::floor(gpus_per_node / dp_stride)), 1.0, members);
}

Geometry geometry(strategies::GroupKind kind, const config::Scenario& s) {
  const auto& p = s.parallelism;
  const auto& c = s.cluster;
  const double D = p.data, T = p.tensor, P = p.pipeline, C = p.context, G = D * C, E = p.expert;
  // Data-parallel groups hold every (T x C x P)-th GPU (tensor, context, then pipeline, then
  // data), or every (T x C)-th when the pipeline is outermost, and their context ranks every T-th;
  // tensor groups are contiguous.
  const double dp_stride = p.pipeline_outer ? T * C : T * C * P;
  const double cp_per_node = std::clamp(std::floor(c.gpus_per_node / T), 1.0, C);
  switch (kind) {
    case strategies::GroupKind::Data:  // a group's context ranks spread over nodes leave one data rank per node
      return {G, T, cp_per_node * (cp_per_node < C ? 1.0 : std::clamp(std::floor(c.gpus_per_node / dp_stride), 1.0, D))};
    case strategies::GroupKind::ExpertData: {  // expert-data ranks: every (expert x expert_tensor)-th stage rank
      const double R = p.expert_tensor_size(), edp = p.expert_data();
      return {edp, R * E, folded_per_node(edp, E * R, T * C, dp_stride, c.gpus_per_node)};
    }
    case strategies::GroupKind::Expert:  // expert ranks: every expert_tensor-th stage rank
      return {E, T * G / E, folded_per_node(E, p.expert_tensor_size(), T * C, dp_stride, c.gpus_per_node)};
    case strategies::GroupKind::ExpertBlock: return {E, T, std::clamp(std::floor(c.gpus_per_node / dp_stride), 1.0, E)};
    case strategies::GroupKind::Tensor: return {T, 1, std::min<double>(T, c.gpus_per_node)};
    case strategies::GroupKind::StagePair: return {2, 1, 1};
    case strategies::GroupKind::EmbeddingPair: return {2, G * T, 1};
    case strategies::GroupKind::Shard: {  // HSDP: shard_size consecutive data ranks, each with its context ranks
      const double S = p.shard_size > 0 ? p.shard_size : D;
      return {S * C, T * D / S, cp_per_node * (cp_per_node < C ? 1.0 : std::clamp(std::floor(c.gpus_per_node / dp_stride), 1.0, S))};
    }
    case strategies::GroupKind::Replicate: {  // every shard_size-th data rank
      const double S = p.shard_size > 0 ? p.shard_size : D;
      return {D / S, T * C * S, std::clamp(std::floor(c.gpus_per_node / (dp_stride * S)), 1.0, D / S)};
    }
    case strategies::GroupKind::Servers: break;
  }
  return {};
}

// The collectives the replay would lower, as the emitter and the units count them: their flows
// and modelled time, one entry per operation and kind of group.
Tally collective_tally(const config::Scenario& s, Backend backend, const Counting& k) {
  auto counts = strategies::emitter_collectives(k.count);
  for (const auto* u : k.count.units)
    for (const auto& c : u->collectives(k.count)) counts.push_back(c);
  std::map<std::tuple<int, int, int>, double> merged;
  for (const auto& c : counts) merged[{static_cast<int>(c.op), static_cast<int>(c.algorithm), static_cast<int>(c.group)}] += c.count;
  Tally tally{s.cluster, backend};
  for (const auto& [key, count] : merged) {
    const auto [op, algorithm, group] = key;
    const auto a = static_cast<Algorithm>(algorithm);
    if (static_cast<strategies::GroupKind>(group) == strategies::GroupKind::Servers) {
      if (count <= 0) continue;
      // One worker's push and pull against every shard, per worker.
      const network::FlowBound one = async_update_flows(s.cluster, a, s.parallelism.data);
      tally.flows += count * one.flows;
      tally.seconds += collective_seconds(one, count, backend);
      continue;
    }
    const Geometry g = geometry(static_cast<strategies::GroupKind>(group), s);
    tally.add(static_cast<CollectiveOp>(op), a, g.ranks, g.groups, g.per_node, count);
  }
  return tally;
}

}  // namespace

Estimate estimate(const config::Scenario& s, Backend backend, bool replay, const SliceFacts& facts) {
  const Counting k(s, facts);
  const double steps = replay ? s.steps_simulated : 1;
  const double tasks = step_tasks(k) * steps;  // over every simulated step
  const Tally tally = replay ? collective_tally(s, backend, k) : Tally{s.cluster, backend};
  const double gpus = static_cast<double>(s.cluster.nodes) * s.cluster.gpus_per_node;

  Estimate e;
  const int b = index(backend);
  e.tasks = tasks;
  const double repeats = backend == Backend::SimGrid ? steps : 1;  // the analytical replay prices a collective once
  e.flows = tally.flows * repeats;
  e.seconds = tasks * kTaskSeconds[b] + tally.seconds * repeats + (replay ? gpus * kGpuSeconds[b] : 0);
  // The plan's graph and, over several steps, its copy per step; the widest lowered collective.
  e.bytes = kBaseBytes + (tasks + (steps > 1 ? tasks / steps : 0)) * kTaskBytes;
  if (replay) e.bytes += tally.widest * kLoweredFlowBytes + gpus * kGpuBytes[b];
  return e;
}

namespace {

// The key a user would change to bring the cost down.
std::string blame(const config::Scenario& s, bool per_step_ok) {
  if (s.steps_simulated > 1 && per_step_ok) return "/simulation/steps";
  const double micro = static_cast<double>(strategies::layout_of(s.parallelism, s.training).micro_batches);
  if (micro > 1000) return "/training/global_batch_size";
  return "/cluster/nodes";
}

bool within(const Estimate& e) { return e.tasks <= kMaxTasks && e.seconds <= kMaxSeconds && e.bytes <= kMaxBytes; }

// What to say about the analytical backend when SimGrid cannot take a scenario.
std::string alternative(const config::Scenario& s, const Estimate* analytical) {
  if (s.backend != Backend::SimGrid || !analytical) return "";
  if (!within(*analytical)) return "; the analytical backend would not serve either";
  if (!s.stragglers.throttles.empty() || !s.stragglers.flapping_links.empty())
    return "; the analytical backend would, without the throttles and flapping links only SimGrid replays";
  return fmt::format("; the analytical backend handles it (\"simulation\": {{\"backend\": \"analytical\"}}, about {:.0f} s)",
                     std::max(1.0, analytical->seconds));
}

[[noreturn]] void refuse(const config::Scenario& s, const Estimate& e, bool replay, const Estimate* analytical) {
  const double steps = replay ? s.steps_simulated : 1;
  const std::string over_steps = steps > 1 ? fmt::format(" over {} steps", with_commas(steps)) : "";
  const std::string what =
      replay ? fmt::format("simulating this on the {} backend", name(s.backend)) : std::string("planning this");
  if (e.tasks > kMaxTasks)  // the same tasks on either backend
    throw InputError(s.file, blame(s, e.tasks / steps <= kMaxTasks),
                     fmt::format("{} means about {} tasks{}, over the limit of {} tasks (time and memory)", what,
                                 millions(e.tasks), over_steps, millions(kMaxTasks)));
  if (e.bytes > kMaxBytes)
    throw InputError(s.file, blame(s, (e.bytes - kBaseBytes) / steps + kBaseBytes <= kMaxBytes),
                     fmt::format("{} needs about {:.1f} GB of memory{}, over the limit of {:.0f} GB{}", what, e.bytes / 1e9,
                                 over_steps, kMaxBytes / 1e9, alternative(s, analytical)));
  throw InputError(s.file, blame(s, e.seconds / steps <= kMaxSeconds),
                   fmt::format("{} takes about {:.0f} s ({} tasks, {} network flows{}), over the limit of {:.0f} s{}", what,
                               e.seconds, millions(e.tasks), millions(e.flows), over_steps, kMaxSeconds,
                               alternative(s, analytical)));
}

}  // namespace

void check_budget(const config::Scenario& s, bool replay) {
  const double gpus = static_cast<double>(s.cluster.nodes) * s.cluster.gpus_per_node;
  const Estimate analytical = estimate(s, Backend::Analytical, replay);
  if (replay && s.backend == Backend::SimGrid && gpus > kMaxSimGridGpus)
    throw InputError(s.file, "/cluster/nodes",
                     fmt::format("{} GPUs on the simgrid backend exceed its limit of {} GPUs{}", with_commas(gpus),
                                 with_commas(kMaxSimGridGpus), alternative(s, &analytical)));
  const Estimate e = s.backend == Backend::Analytical || !replay ? analytical : estimate(s, s.backend, replay);
  if (!within(e)) refuse(s, e, replay, &analytical);
}

Estimate plan_estimate(const config::Scenario& s, const taskgraph::TaskGraph& g, Backend backend) {
  const int b = index(backend);
  const double steps = s.steps_simulated;
  const double gpus = static_cast<double>(s.cluster.num_gpus());
  Estimate e;
  e.tasks = static_cast<double>(g.tasks.size()) * steps;
  e.seconds = e.tasks * kTaskSeconds[b] + gpus * kGpuSeconds[b];
  double widest = 0;
  std::unordered_map<const taskgraph::Collective*, network::FlowBound> seen;  // one per distinct collective
  for (const auto& t : g.tasks) {
    if (!t.is_collective) continue;
    const auto& c = t.collective();
    auto [it, fresh] = seen.try_emplace(&c);
    if (fresh) {
      const auto& first = g.groups[static_cast<std::size_t>(c.groups.front())];
      const int node = first.empty() ? 0 : first.front() / s.cluster.gpus_per_node;
      const double per_node = static_cast<double>(
          std::count_if(first.begin(), first.end(), [&](int r) { return r / s.cluster.gpus_per_node == node; }));
      if (c.only >= 0) {  // one worker against every server shard, or against host memory
        it->second = async_update_flows(s.cluster, c.algorithm, static_cast<double>(first.size()));
      } else {
        it->second = network::flow_bound(s.cluster, c.op, c.algorithm, static_cast<double>(first.size()),
                                         static_cast<double>(c.groups.size()), per_node, c.bytes);
      }
      widest = std::max(widest, it->second.flows);
    } else if (backend == Backend::Analytical) {
      continue;  // priced once
    }
    const double repeats = backend == Backend::SimGrid ? steps : 1;
    e.flows += it->second.flows * repeats;
    e.seconds += collective_seconds(it->second, repeats, backend);
  }
  e.bytes = kBaseBytes + (e.tasks + static_cast<double>(g.tasks.size())) * kTaskBytes + widest * kLoweredFlowBytes +
            gpus * kGpuBytes[b];
  return e;
}

void check_plan_budget(const config::Scenario& s, const taskgraph::TaskGraph& g) {
  const Estimate e = plan_estimate(s, g, s.backend);
  if (within(e)) return;
  const Estimate analytical = plan_estimate(s, g, Backend::Analytical);
  refuse(s, e, true, &analytical);
}

void check_collective_budget(const network::ClusterSpec& cluster, CollectiveOp op, Algorithm a, int gpus, double rows,
                             bool analytical) {
  const auto b = network::flow_bound(cluster, op, a, gpus, 1, cluster.gpus_per_node);
  const auto cost = [&](Backend backend) {
    const int k = index(backend);
    return collective_seconds(b, rows, backend) + static_cast<double>(cluster.num_gpus()) * kGpuSeconds[k];
  };
  const auto bytes = [&](Backend backend) {
    return kBaseBytes + b.flows * kLoweredFlowBytes * (backend == Backend::SimGrid ? rows : 1) +
           static_cast<double>(cluster.num_gpus()) * kGpuBytes[index(backend)];
  };
  const auto fits = [&](Backend backend) {
    return cost(backend) <= kMaxSeconds && bytes(backend) <= kMaxBytes &&
           (backend == Backend::Analytical || cluster.num_gpus() <= kMaxSimGridGpus);
  };
  const Backend asked = analytical ? Backend::Analytical : Backend::SimGrid;
  if (fits(asked)) return;
  const std::string other = !analytical && fits(Backend::Analytical)
                                ? "; --analytical handles it"
                                : "; fewer GPUs or fewer sizes (-b, -e, -f) would";
  if (!analytical && cluster.num_gpus() > kMaxSimGridGpus)
    throw InputError("", "--gpus", fmt::format("{} GPUs on the simgrid backend exceed its limit of {} GPUs{}",
                                               with_commas(cluster.num_gpus()), with_commas(kMaxSimGridGpus), other));
  throw InputError("", "--gpus",
                   fmt::format("{} {} of {} on {} GPUs take{} about {:.0f} s and {:.1f} GB on the {} backend ({} flows), over "
                               "the limits of {:.0f} s and {:.0f} GB{}",
                               rows, rows == 1 ? "size" : "sizes", taskgraph::to_string(op), with_commas(gpus), rows == 1 ? "s" : "", cost(asked), bytes(asked) / 1e9,
                               name(asked), millions(b.flows * rows), kMaxSeconds, kMaxBytes / 1e9, other));
}

}  // namespace dtsim::results
