#include "sim/results/budget.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <unordered_map>

#include "sim/core/errors.hpp"
#include "sim/replay/dispatch.hpp"
#include "sim/results/closed_form.hpp"
#include "strategies/buckets.hpp"

namespace dtsim::results {

using config::Backend;
using taskgraph::Algorithm;
using taskgraph::CollectiveOp;

namespace {

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
// The sweep's closed form (closed_form.hpp) per strategy: its layout, passes and step, whole
// sweeps of GPT-3 175B taking 0.25 ms a strategy here on 1,024 A100s and 0.7 ms on 16,384, start-up
// included (scripts/bench.sh), counted at 0.5 ms; and one group of its data-parallel collective
// lowered at the analytical flow's cost, for each of three bucket sizes (the first sight of a
// group shape; network::GroupPrices keeps it).
double closed_form_seconds(const config::Scenario& s) {
  const auto& p = s.parallelism;
  const double per_node = std::clamp(std::floor(s.cluster.gpus_per_node / static_cast<double>(p.tensor * p.pipeline)), 1.0,
                                     static_cast<double>(p.data));
  const auto b = network::flow_bound(s.cluster, CollectiveOp::AllReduce, p.algorithm, p.data, 1, per_node);
  return 0.5e-3 + 3 * b.flows * 0.5e-6;
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

namespace {
// One tensor rank's slice of the op graph (at most 10,000 blocks, so cheap to build).
models::BuildOptions slice_options(const strategies::ParallelismSpec& p) {
  models::BuildOptions slice;
  slice.tensor = p.tensor;
  slice.sequence_parallel = p.sequence_parallel;
  slice.expert = p.expert;
  return slice;
}
}  // namespace

SliceFacts slice_facts(const config::Scenario& s) { return slice_facts(s, s.model.build(slice_options(s.parallelism))); }

// Its layers, gradient buckets and whether the first and last stages share parameters.
SliceFacts slice_facts(const config::Scenario& s, const models::ModelGraph& graph) {
  const auto& p = s.parallelism;
  SliceFacts f;
  f.layers = static_cast<double>(graph.layers.size());
  f.tied = graph.tied_params > 0;
  const double gbytes = strategies::grad_bytes_per_param(s.training.precision);
  std::vector<const models::Layer*> all_layers;
  for (const auto& layer : graph.layers) all_layers.push_back(&layer);
  f.buckets = static_cast<double>(strategies::make_buckets(all_layers, gbytes, p.bucket_bytes, p.first_bucket_bytes).size());
  if (p.zero_stage == 3 && p.data * p.context > 1 && p.framework.framework != strategies::Framework::MegatronLM) {
    const bool full_recompute = p.recompute == strategies::Recompute::Full || p.recompute == strategies::Recompute::Stage;
    f.z3_gathers = static_cast<double>(strategies::zero3_gathers(all_layers, p.framework, full_recompute).size());
    f.z3_reduces = static_cast<double>(strategies::zero3_reduce_buckets(all_layers, p.framework).size());
  }
  if (p.offload_optimizer) {
    const double cap = p.framework.reduce_bucket_params * gbytes;
    f.offload_buckets = static_cast<double>(strategies::make_buckets(all_layers, gbytes, cap, cap).size());
  }
  if (p.expert > 1) {
    for (const auto& layer : graph.layers) f.moe_layers += layer.experts.moe() ? 1 : 0;
    if (p.data > p.expert)
      f.expert_buckets = static_cast<double>(
          strategies::make_buckets(all_layers, gbytes, p.bucket_bytes, p.first_bucket_bytes, strategies::BucketParams::Expert).size());
  }
  return f;
}

Estimate estimate(const config::Scenario& s, Backend backend, bool replay) { return estimate(s, backend, replay, slice_facts(s)); }

namespace {

// What the estimate counts with: the scenario's sizes and micro-batches, and its slice's layers,
// buckets and gathers.
struct Counted {
  double gpus = 0, D = 0, T = 0, P = 0, C = 0, G = 0, chunks = 0, micro = 0;
  bool sync = false;
  double replicas = 0, iterations = 0, steps = 0;
  bool zero3 = false, gathers = false, framework_zero3 = false, ep = false, edp = false, tied = false;
  double layers = 0, buckets = 0, z3_gathers = 0, z3_reduces = 0, moe_layers = 0, expert_buckets = 0;
};

Counted counted(const config::Scenario& s, bool replay, const SliceFacts& facts) {
  const auto& p = s.parallelism;
  const auto& c = s.cluster;
  Counted k;
  k.gpus = static_cast<double>(c.nodes) * c.gpus_per_node;
  k.D = p.data, k.T = p.tensor, k.P = p.pipeline;
  // Gradients are summed over data x context ranks (context parallelism splits sequences, not weights).
  k.C = p.context, k.G = k.D * k.C;
  const double v = p.schedule == strategies::Schedule::Interleaved ? p.virtual_stages : 1;
  k.chunks = k.P * v;
  k.micro = static_cast<double>(strategies::micro_batches(s.training.global_batch, p.data, p.micro_batch));
  k.sync = p.updates == strategies::Updates::Sync;
  k.replicas = p.all_replicas || !k.sync ? k.D : 1;
  k.iterations = p.updates == strategies::Updates::Easgd ? p.easgd_period : 1;
  k.steps = replay ? s.steps_simulated : 1;
  k.zero3 = p.zero_stage == 3 && k.G > 1;
  k.gathers = p.tensor > 1 && !p.sequence_parallel;  // the receiving tensor group re-assembles
  k.layers = facts.layers;
  k.tied = facts.tied;
  // Gradient buckets as DDP fills them over the whole model (strategies/buckets), plus what
  // splitting it into P stages adds: each stage starts its own, with a small first bucket.
  const bool buckets_sync = k.sync && k.G > 1 && !k.zero3;
  k.buckets = facts.buckets + 2 * k.P;
  if (!buckets_sync) k.buckets = 0;
  k.framework_zero3 = k.zero3 && p.framework.framework != strategies::Framework::MegatronLM;
  k.z3_gathers = facts.z3_gathers, k.z3_reduces = facts.z3_reduces;
  k.moe_layers = facts.moe_layers;
  k.ep = p.expert > 1, k.edp = k.ep && p.data > p.expert;
  if (k.ep && k.edp && !k.zero3) k.expert_buckets = facts.expert_buckets + 2 * k.P;
  return k;
}

// Tasks of the plan, over every simulated step.
double count_tasks(const config::Scenario& s, const Counted& k, const SliceFacts& facts) {
  const auto& p = s.parallelism;
  const double D = k.D, P = k.P, G = k.G, chunks = k.chunks, micro = k.micro, replicas = k.replicas;
  const double iterations = k.iterations, steps = k.steps, layers = k.layers, buckets = k.buckets;
  const double z3_gathers = k.z3_gathers, z3_reduces = k.z3_reduces, moe_layers = k.moe_layers;
  const double expert_buckets = k.expert_buckets;
  const bool sync = k.sync, zero3 = k.zero3, gathers = k.gathers, framework_zero3 = k.framework_zero3, ep = k.ep, edp = k.edp;
  // Tasks: each replica's forward and backward passes, the sends between stages (and the
  // receiving tensor group's gathers), ZeRO-2's reduces and ZeRO-3's per-layer gathers and
  // reduce-scatters, the last backward split per layer (to start the buckets), the per-layer
  // forwards of priority order, loads, EASGD's local steps; then buckets, compression, optimizer
  // steps, parameter gathers, the embedding sync and asynchronous exchanges.
  double passes = micro * chunks * 2 + micro * (chunks - 1) * 2 * (gathers ? 2 : 1);
  if (p.zero_stage == 2 && G > 1) passes += micro * chunks;
  // DeepSpeed's and FSDP's ZeRO-3 (strategies/plan_framework.cpp): per micro-batch the gathers
  // and reduce-scatters its rules issue (counted as the planner counts them), and the passes split
  // where they wait for a gather: each layer's forward and backward, plus one piece per gather.
  if (zero3) passes += micro * (framework_zero3 ? 2 * layers + 2 * z3_gathers + z3_reduces : 5 * layers);
  // Offload: gradient buckets copied down, the host step and the parameters copied up, per stage;
  // activations down and back per pass.
  if (p.offload_optimizer) passes += facts.offload_buckets + 3 * P;
  if (p.activation_offload) passes += 4 * micro * layers;  // per layer: its passes split, two copies
  // Zero-bubble's W passes; PipeDream's update (after a data-parallel all-reduce) per backward.
  if (p.schedule == strategies::Schedule::ZeroBubbleH1) passes += micro * chunks;
  if (p.schedule == strategies::Schedule::PipeDream) passes += micro * P * (p.data > 1 ? 2 : 1);
  passes += layers * (1 + (p.priority_buckets ? 1 : 0)) + (p.input.enabled ? micro : 0) +
            (p.updates == strategies::Updates::Easgd ? P : 0);
  double tasks = replicas * iterations * passes;
  const double per_bucket =
      1 + (p.compression != strategies::Compression::None ? replicas : 0) + (p.priority_buckets ? replicas : 0);
  tasks += buckets * per_bucket + P * (replicas + 1) + 1 + (sync ? 0 : 2 * replicas);
  // Expert parallelism (strategies/plan_experts.cpp): every layer's pass is a task of its own, an
  // MoE layer's three with two all-to-alls between them (and the most loaded GPU's experts under
  // skew), its forward again before backward under full recomputation; expert gradient buckets
  // and, under ZeRO-1/2, their parameter gathers; ZeRO-2's per-micro-batch reduces and ZeRO-3's
  // per-layer gathers and reduce-scatters of the experts, over their own groups.
  if (ep) {
    const double per_moe = 4 + (p.expert_skew > 0 ? 1 : 0);  // beyond the layer's one task
    const double again = p.recompute == strategies::Recompute::Full ? 1 + per_moe : 0;
    tasks += replicas * micro * (2 * layers + moe_layers * (2 * per_moe + again));
    tasks += expert_buckets + P;
    if (edp && p.zero_stage == 2) tasks += replicas * micro * chunks;
    if (edp && zero3) tasks += replicas * micro * 3 * moe_layers;
  }
  // Every replica simulated (synchronous): the replicas join one task for each collective of the
  // passes over their data-parallel group (ZeRO-2's reduces but the last micro-batch's, ZeRO-3's,
  // PipeDream's all-reduces) and over their expert-parallel group (the all-to-alls), counted above
  // once per replica (strategies/plan_replicas.cpp).
  if (sync && p.all_replicas && D > 1) {
    double joined = 0;  // per replica
    if (G > 1 && p.zero_stage == 2) joined += (micro - 1) * chunks * (edp ? 2 : 1);
    if (zero3) joined += micro * (framework_zero3 ? z3_gathers + z3_reduces : 3 * layers + (edp ? 3 * moe_layers : 0));
    if (G > 1 && p.schedule == strategies::Schedule::PipeDream) joined += micro * P;
    tasks -= (replicas - 1) * joined;
    if (ep) tasks -= (replicas - D / p.expert) * micro * moe_layers * (4 + (p.recompute == strategies::Recompute::Full ? 2 : 0));
  }
  tasks *= steps;
  return tasks;
}

// The collectives the replay would lower: their flows and modelled time.
Tally collective_tally(const config::Scenario& s, Backend backend, const Counted& k) {
  const auto& p = s.parallelism;
  const auto& c = s.cluster;
  const double D = k.D, T = k.T, P = k.P, C = k.C, G = k.G, chunks = k.chunks, micro = k.micro, replicas = k.replicas;
  const double iterations = k.iterations, layers = k.layers, buckets = k.buckets;
  const double z3_gathers = k.z3_gathers, z3_reduces = k.z3_reduces, moe_layers = k.moe_layers;
  const double expert_buckets = k.expert_buckets;
  const bool sync = k.sync, zero3 = k.zero3, gathers = k.gathers, framework_zero3 = k.framework_zero3, ep = k.ep, edp = k.edp;
  const bool tied = k.tied;
  // Data-parallel groups hold every (T x C x P)-th GPU (tensor, context, then pipeline, then
  // data), or every (T x C)-th when the pipeline is outermost, and their context ranks every T-th;
  // tensor groups are contiguous.
  const double dp_stride = p.pipeline_outer ? T * C : T * C * P;
  const double cp_per_node = std::clamp(std::floor(c.gpus_per_node / T), 1.0, C);
  const double dp_per_node =  // a group's context ranks spread over nodes leave one data rank per node
      cp_per_node * (cp_per_node < C ? 1.0 : std::clamp(std::floor(c.gpus_per_node / dp_stride), 1.0, D));
  const double tp_per_node = std::min<double>(T, c.gpus_per_node);
  Tally tally{c, backend};
  const Algorithm a = p.algorithm;
  const CollectiveOp grad_op = p.compression == strategies::Compression::TopK ? CollectiveOp::AllGather
                               : p.zero_stage == 0                            ? CollectiveOp::AllReduce
                                                                              : CollectiveOp::ReduceScatter;
  tally.add(grad_op, a, G, T, dp_per_node, buckets);
  if (sync && G > 1 && (p.zero_stage == 1 || p.zero_stage == 2)) {
    tally.add(CollectiveOp::AllGather, a, G, T, dp_per_node, P);
    if (p.zero_stage == 2) tally.add(CollectiveOp::ReduceScatter, a, G, T, dp_per_node, micro * chunks);
  }
  if (p.schedule == strategies::Schedule::PipeDream && p.data > 1)
    tally.add(CollectiveOp::AllReduce, a, D, T, dp_per_node, micro * P);
  if (zero3) {
    tally.add(CollectiveOp::AllGather, a, G, T, dp_per_node, (framework_zero3 ? z3_gathers : 2 * layers) * micro);
    tally.add(CollectiveOp::ReduceScatter, a, G, T, dp_per_node, (framework_zero3 ? z3_reduces : layers) * micro);
  }
  if (ep) {
    const double E = p.expert;
    const double ep_per_node = std::clamp(std::floor(c.gpus_per_node / dp_stride), 1.0, E);
    const double a2a = micro * moe_layers * (p.recompute == strategies::Recompute::Full ? 6 : 4);
    tally.add(CollectiveOp::AllToAll, Algorithm::Direct, E, T * D / E, ep_per_node, a2a);
    const double edp_per_node = std::clamp(std::floor(c.gpus_per_node / (dp_stride * E)), 1.0, D / E);
    tally.add(grad_op, a, D / E, T * E, edp_per_node, expert_buckets);
    if (edp && (p.zero_stage == 1 || p.zero_stage == 2)) tally.add(CollectiveOp::AllGather, a, D / E, T * E, edp_per_node, P);
    if (edp && p.zero_stage == 2) tally.add(CollectiveOp::ReduceScatter, a, D / E, T * E, edp_per_node, micro * chunks);
    if (edp && zero3) {
      tally.add(CollectiveOp::AllGather, a, D / E, T * E, edp_per_node, 2 * moe_layers * micro);
      tally.add(CollectiveOp::ReduceScatter, a, D / E, T * E, edp_per_node, moe_layers * micro);
    }
  }
  const double sends = 2 * micro * (chunks - 1) * replicas * iterations;
  tally.add(CollectiveOp::SendRecv, a, 2, 1, 1, sends);
  if (gathers) tally.add(CollectiveOp::AllGather, a, T, 1, tp_per_node, sends);
  if (P > 1 && tied) tally.add(CollectiveOp::AllReduce, a, 2, G * T, 1, 1);
  if (!sync) {  // one worker's push and pull against every shard, per replica
    const double shards = a == Algorithm::ParameterServer ? (c.ps_servers > 0 ? c.ps_servers : D) : 1;
    network::FlowBound one{2 * shards, shards, false};
    tally.flows += replicas * one.flows;
    tally.seconds += collective_seconds(one, replicas, backend);
  }
  return tally;
}

}  // namespace

Estimate estimate(const config::Scenario& s, Backend backend, bool replay, const SliceFacts& facts) {
  const Counted k = counted(s, replay, facts);
  const double tasks = count_tasks(s, k, facts);
  const Tally tally = replay ? collective_tally(s, backend, k) : Tally{s.cluster, backend};
  const double gpus = k.gpus, steps = k.steps;

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
  const auto& p = s.parallelism;
  const double micro = static_cast<double>(strategies::micro_batches(s.training.global_batch, p.data, p.micro_batch));
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
        const double shards = c.algorithm == Algorithm::ParameterServer
                                  ? (s.cluster.ps_servers > 0 ? s.cluster.ps_servers : static_cast<double>(first.size()))
                                  : 1;
        it->second = {2 * shards, shards, false};
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

void check_sweep_budget(const config::Scenario& base, const std::vector<strategies::ParallelismSpec>& candidates,
                        const std::string& gpus_flag) {
  check_sweep_budget(std::vector<SweepGroup>{{base, candidates, {}}}, gpus_flag);
}

void check_sweep_budget(const std::vector<SweepGroup>& groups, const std::string& gpus_flag, int confirm) {
  double seconds = 0, bytes = 0, gpus = 0;
  std::size_t count = 0;
  std::vector<double> replays;  // what replaying each candidate the closed form prices would take
  std::map<std::tuple<const SweepGroup*, int, bool, double, double, int, int, bool, int, int>, SliceFacts> facts;
  std::map<std::tuple<const SweepGroup*, int, bool, int>, models::ModelGraph> slices;  // by slice_options
  for (const auto& g : groups) {
    for (std::size_t i = 0; i < g.candidates.size(); ++i) {
      const auto& p = g.candidates[i];
      config::Scenario s = g.base;
      s.parallelism = p;
      if (i < g.precisions.size()) s.training.precision = g.precisions[i];
      // Candidates differ in few of the fields the model slice depends on: built once for each.
      auto [it, fresh] = facts.try_emplace(std::make_tuple(&g, p.tensor, p.sequence_parallel, p.bucket_bytes, p.first_bucket_bytes,
                                                    p.zero_stage, static_cast<int>(p.recompute), p.offload_optimizer, p.expert,
                                                    static_cast<int>(s.training.precision)));
      if (fresh) {
        auto [at, first] = slices.try_emplace(std::make_tuple(&g, p.tensor, p.sequence_parallel, p.expert));
        if (first) at->second = s.model.build(slice_options(p));
        it->second = slice_facts(s, at->second);
      }
      const Estimate e = estimate(s, Backend::Analytical, true, it->second);
      bytes = std::max(bytes, e.bytes);
      if (confirm >= 0 && closed_form_gap(s).empty()) {
        seconds += closed_form_seconds(s);
        replays.push_back(e.seconds);
      } else {
        seconds += e.seconds;
      }
    }
    count += g.candidates.size();
    gpus = std::max(gpus, static_cast<double>(g.base.cluster.num_gpus()));
  }
  const auto confirmed = std::min(replays.size(), static_cast<std::size_t>(std::max(0, confirm)));
  std::partial_sort(replays.begin(), replays.begin() + static_cast<std::ptrdiff_t>(confirmed), replays.end(), std::greater<>());
  for (std::size_t k = 0; k < confirmed; ++k) seconds += replays[k];
  if (seconds <= kMaxSweepSeconds && bytes <= kMaxBytes) return;
  const std::string file = groups.empty() ? "" : groups.front().base.file;
  throw InputError(gpus_flag.empty() ? file : "", gpus_flag.empty() ? "/cluster/nodes" : gpus_flag,
                   fmt::format("sweeping {} strategies on up to {} GPUs takes about {:.0f} s of simulation (the largest {:.1f} GB), "
                               "over the limits of {:.0f} s and {:.0f} GB; fewer GPUs would",
                               count, with_commas(gpus), seconds, bytes / 1e9, kMaxSweepSeconds, kMaxBytes / 1e9));
}

}  // namespace dtsim::results
