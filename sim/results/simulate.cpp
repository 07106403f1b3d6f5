#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <numeric>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sim/config/build_options.hpp"
#include "sim/core/units.hpp"
#include "sim/network/runs_as.hpp"
#include "sim/core/errors.hpp"
#include "sim/cost/roofline.hpp"
#include "sim/network/collectives.hpp"
#include "sim/cost/comm_interference.hpp"
#include "sim/results/budget.hpp"
#include "sim/results/inline_comm.hpp"
#include "sim/results/result.hpp"
#include "sim/results/torus_layout.hpp"

namespace dtsim::results {

void adopt_plan(Result& r, strategies::Plan plan, const config::Scenario& s) {
  r.plan = std::move(plan);
  r.memory = r.plan.memory;
  r.memory.other += s.reserved_bytes;
  r.worst_rank = r.plan.worst_rank;
  r.capacity_bytes = s.device.memory_bytes;
  r.allocator_slack = r.plan.allocator_slack;
  r.fits = r.device_peak() <= r.capacity_bytes;
  r.model_flops = r.plan.model_flops_per_step;
  r.hardware_flops = r.plan.hardware_flops_per_step;
}

namespace {

// Every step the same but for when it starts: no draw per step (jitter), nothing that changes
// with time (throttles, flapping links), and steps that wait only for the one before
// (synchronous updates, no staleness bound). Replays of such steps may derive the later ones
// from two (replay::StepReuse), when the replay finds the steady state that early.
bool steps_alike(const config::Scenario& s) {
  const auto& st = s.stragglers;
  if (st.enabled && (st.jitter != faults::Jitter::None || !st.throttles.empty() || !st.flapping_links.empty())) return false;
  return s.parallelism.updates == strategies::Updates::Sync && s.parallelism.staleness_bound < 0;
}

// DTSIM_FULL_REPLAY=1 replays every step (what the tests compare the derived steps with).
bool full_replay_forced() {
  const char* v = std::getenv("DTSIM_FULL_REPLAY");
  return v && *v && std::string(v) != "0";
}

// Each gradient bucket's collective (its first group stands for the others), as it runs.
std::map<std::string, int> gradient_sync_runs_as(const taskgraph::TaskGraph& g, const network::Platform& platform) {
  std::map<std::string, int> out;
  std::map<std::tuple<int, int, double, int>, std::string> seen;  // buckets are mostly of one size
  for (const auto& t : g.tasks) {
    if (!t.is_collective || t.label().find(" bucket ") == std::string::npos) continue;
    const auto& c = t.collective();
    if (c.groups.empty() || c.only >= 0) continue;
    const auto key = std::tuple{static_cast<int>(c.op), static_cast<int>(c.algorithm), c.bytes, c.groups.front()};
    auto it = seen.find(key);
    if (it == seen.end())
      it = seen.emplace(key, network::runs_as(platform, c.op, c.algorithm, c.bytes, g.groups[static_cast<std::size_t>(c.groups.front())])).first;
    ++out[it->second];
  }
  return out;
}

// Byte counts go out as whole numbers (result.json); past 2^63 they would saturate there, and no
// device comes near: such a model is bad input, not a result.
void check_byte_counts(const Result& r, const config::Scenario& s) {
  const std::pair<const char*, double> counts[] = {
      {"parameters", r.memory.params},        {"gradients", r.memory.gradients},
      {"optimizer state", r.memory.optimizer}, {"activations", r.memory.activations},
      {"other memory", r.memory.other},        {"peak memory", r.memory.peak()},
      {"host memory", r.plan.host_bytes() * s.cluster.gpus_per_node}};
  constexpr double kLargest = 9223372036854775807.0;  // 2^63 - 1, rounded up to 2^63 as a double
  for (const auto& [what, bytes] : counts) {
    if (bytes < kLargest) continue;
    const bool batch = std::string(what) == "activations" && s.parallelism.micro_batch > 1;
    throw InputError(s.file, batch ? "/parallelism/micro_batch_size" : "/model",
                     fmt::format("the {} of one GPU come to {:.3g} bytes, more than a byte count holds (2^63, about 9.2 "
                                 "EB) and far beyond any device; a smaller model{} would do",
                                 what, bytes, batch ? " or micro-batch" : ""));
  }
}

// Inline collectives (tensor and context parallelism) are priced alone on their group: what they
// leave exposed, and what their overlap takes from the GEMMs beside them, add to the work.
void price_inline_comms(Result& r, const config::Scenario& s, const network::Platform& platform) {
  const auto& g = r.plan.graph;
  const std::string dtype = config::compute_dtype(s.training.precision);
  r.work_comm_seconds.assign(g.works.size(), 0.0);
  r.work_interference_seconds.assign(g.works.size(), 0.0);
  r.work_all_to_all_seconds.assign(g.works.size(), 0.0);
  const std::vector<double> compute = r.work_seconds;  // kernels only, before any communication
  for (std::size_t w = 0; w < g.works.size(); ++w)
    for (const auto& c : g.works[w].comms) {
      const auto& ranks = g.groups[static_cast<std::size_t>(c.group)];
      auto alone = [&](double bytes) { return network::inline_time(platform, {c.op, c.group, bytes, 1.0}, ranks); };
      // Overlapped expert all-to-alls are hidden by another micro-batch's whole pass piece.
      const double kernel = c.hidden_work >= 0 ? compute[static_cast<std::size_t>(c.hidden_work)]
          : c.hidden_by < 0 ? 0.0
          : cost::quote_kernel(s.device, g.works[w].kernels[static_cast<std::size_t>(c.hidden_by)], dtype).seconds;
      const auto one = inline_cost(c, network::inline_time(platform, c, ranks), alone, kernel, cost::sm_share(s.device, c.margin_sms));
      r.work_comm_seconds[w] += one.exposed;
      r.work_interference_seconds[w] += one.interference;
      if (c.op == taskgraph::CollectiveOp::AllToAll) r.work_all_to_all_seconds[w] += one.exposed;
    }
}

Result plan_only(const config::Scenario& s, bool search_fewest) {
  Result r;
  r.scenario_spec = s;
  r.scenario = s.name;
  // A CPU's cores, or a GPU's SMs under a stack that models communication interference.
  r.comm_core_share = s.device.comm_core_share > 0 ? s.device.comm_core_share : cost::comm_sm_share(s.device);
  r.comm_share_is_sms = s.device.comm_core_share == 0 && r.comm_core_share > 0;
  r.gpus = s.cluster.num_gpus();
  const models::ModelGraph graph = s.model.build(config::build_options(s));
  const models::ModelGraph all = s.model.build(config::whole_model_options(s));
  r.params = all.params();
  r.active_params = all.active_params();
  r.active_params_without_input_embedding = all.active_params(false);
  adopt_plan(r, strategies::plan_training(graph, s.parallelism, s.training, s.host), s);
  check_byte_counts(r, s);
  if (!r.fits) {
    r.warnings.push_back(fmt::format("does not fit: rank {} needs {:.1f} GiB of {:.1f} GiB", r.worst_rank,
                                     r.device_peak() / units::kGiB, r.capacity_bytes / units::kGiB));
  }
  if (!r.fits && search_fewest) {
    // The search shares the planning budget with the plan just made (check_budget's estimate).
    const double planned = estimate(s, config::Backend::Analytical, false).seconds;
    FitSearch search;
    r.fewest_fit = fewest_gpus_that_fit(s, 1 << 16, std::max(0.0, kMaxSeconds - planned), &search);
    r.fewest_fit_stopped = search.stopped;
  }
  // Host memory: every GPU of a node keeps its share there (ZeRO-Offload, activation offload).
  const double host = r.plan.host_bytes() * s.cluster.gpus_per_node;
  if (host > s.host.memory_bytes_per_node)
    r.warnings.push_back(fmt::format("host memory does not fit: a node needs {:.1f} GiB of {:.1f} GiB", host / units::kGiB,
                                     s.host.memory_bytes_per_node / units::kGiB));
  return r;
}

}  // namespace

Result memory_only(const config::Scenario& s) {
  check_budget(s, false);
  Result r = plan_only(s, true);
  r.timed = false;
  return r;
}

namespace {

// A simulated step is the global batch once per local iteration (EASGD runs several).
double samples_per_step(const Result& r, const config::Scenario& s) {
  return static_cast<double>(s.training.global_batch) * r.plan.iterations_per_step;
}

// Inline collectives (tensor parallelism) are priced alone on their group and add to the work,
// as do the host copies; and each gradient bucket's collective as it runs.
void add_communication(Result& r, const config::Scenario& s, const network::Platform& platform) {
  const auto& g = r.plan.graph;
  r.gradient_sync_runs_as = gradient_sync_runs_as(g, platform);
  price_inline_comms(r, s, platform);
  for (std::size_t w = 0; w < g.works.size(); ++w) {
    r.work_seconds[w] += r.work_comm_seconds[w] + r.work_interference_seconds[w] + g.works[w].fixed_seconds;
    // PCIe copies of all the GPUs the task stands for, together on the host links, and of the
    // other replicas' GPUs copying the same at the same moment (SimGrid's flows share them).
    if (const auto& wk = g.works[w]; wk.copy_bytes > 0) {
      const int together = wk.copy_together_group >= 0 ? wk.copy_together_group : wk.copy_group;
      r.work_seconds[w] += network::analytical_time(
          platform, network::lower_host_copy(platform, wk.copy_bytes, g.groups[static_cast<std::size_t>(together)], wk.copy_to_host));
    }
  }
}

// What the replay ran: the step repeated `steps` times, each task's step, and the stragglers'
// scales of the compute tasks, which run on each tensor x context group's first GPU at the
// slowest member's pace.
struct Replayed {
  int steps = 1;
  std::vector<int> step_of;  // each task's step; with one step, none needed
  int group = 1;
  replay::TaskScales scales;
  const replay::TaskScales* scaled = nullptr;  // &scales with stragglers
};

void replay_steps(Result& r, const config::Scenario& s, const network::Platform& platform, Replayed& rp) {
  const auto& g = r.plan.graph;
  const int steps = rp.steps = s.steps_simulated;
  if (static_cast<double>(g.tasks.size()) * steps > kMaxTasks)  // check_budget's estimate is meant to catch it first
    throw InputError(s.file, "/simulation/steps",
                     fmt::format("{} steps of {} tasks is more than {:.0f} million tasks to replay", steps, g.tasks.size(),
                                 kMaxTasks / 1e6));
  if (steps > 1) r.repeated = repeat_steps(g, steps, rp.step_of, s.parallelism.staleness_bound);
  const taskgraph::TaskGraph& replayed = steps > 1 ? r.repeated : g;
  rp.group = s.parallelism.tensor * s.parallelism.context;
  if (s.stragglers.enabled) rp.scales = task_scales(replayed, rp.step_of, steps, s.stragglers, rp.group);
  rp.scaled = s.stragglers.enabled ? &rp.scales : nullptr;
  replay::Variability variability;
  variability.throttles = group_throttles(s.stragglers, rp.group);
  // A flap stays on the NIC of the GPU given: every member's flows cross its own NIC.
  for (const auto& f : s.stragglers.flapping_links)
    variability.flaps.push_back({f.gpu, f.period_s, f.degraded_s, f.bandwidth_fraction, f.degraded_latency_s});
  replay::ReplayInput in{replayed, r.work_seconds, platform, rp.scaled, &variability};
  in.comm_core_share = r.comm_core_share;
  if (steps > 1) in.step_tasks = g.tasks.size() + (s.parallelism.staleness_bound >= 0 ? 1 : 0);
  std::optional<replay::StepReuse> reuse;
  if (steps > 2 && steps_alike(s) && !full_replay_forced()) {
    const bool streamed_root = std::any_of(g.tasks.begin(), g.tasks.end(), [](const taskgraph::Task& t) {
      return t.deps.empty() && t.any_deps.empty() && t.stream >= 0;
    });
    reuse.emplace(rp.step_of, g.tasks.size(), steps, !streamed_root);
    in.reuse = &*reuse;
  }
  r.timeline = s.backend == config::Backend::Analytical ? replay::replay_analytical(in) : replay::replay_simgrid(in);
  if (r.timeline.steps_replayed == 0) r.timeline.steps_replayed = steps;
  if (steps > 1) {
    r.steps = report_steps(replayed, r.timeline, rp.step_of, steps, rp.scaled, &s.stragglers, rp.group);
    r.step_time_s = r.steps->mean;
  }
}

// Share of compute time priced from measurements, over the compute tasks the replay ran.
void measured_share(Result& r, const cost::Priced& priced) {
  double all = 0, measured = 0, spread = 0;
  for (const auto& t : r.plan.graph.tasks)
    if (!t.is_collective) {
      all += priced.seconds[static_cast<std::size_t>(t.work)];
      measured += priced.measured_seconds[static_cast<std::size_t>(t.work)];
      spread += priced.spread_seconds[static_cast<std::size_t>(t.work)];
    }
  r.measured_share = all > 0 ? measured / all : 0.0;
  r.compute_spread = all > 0 ? spread / all : 0.0;
}

// Step time, all-to-all time and the breakdown from the timeline. Asynchronous workers do not
// step together: the step time is how long the cluster takes per step's worth of samples at the
// throughput measured while all of them ran.
void step_time_and_breakdown(Result& r, const config::Scenario& s, const Replayed& rp) {
  const taskgraph::TaskGraph& replayed = rp.steps > 1 ? r.repeated : r.plan.graph;
  const int steps = rp.steps;
  if (steps == 1) r.step_time_s = r.timeline.makespan;
  // All-to-alls block the layers that wait for them: their time per step and stage.
  for (std::size_t i = 0; i < replayed.tasks.size(); ++i)
    if (replayed.tasks[i].is_collective && replayed.tasks[i].collective().op == taskgraph::CollectiveOp::AllToAll)
      r.all_to_all_s += r.timeline.end[i] - r.timeline.start[i];
    else if (const int w = replayed.tasks[i].work; !replayed.tasks[i].is_collective && w >= 0 && !r.work_all_to_all_seconds.empty())
      r.all_to_all_s += r.work_all_to_all_seconds[static_cast<std::size_t>(w)];  // what an overlapped one leaves exposed
  r.all_to_all_s /= static_cast<double>(steps) * s.parallelism.pipeline;
  const double samples = samples_per_step(r, s);
  if (s.parallelism.updates != strategies::Updates::Sync) {
    r.async = report_async(replayed, r.timeline, samples / s.parallelism.data);
    r.step_time_s = samples / r.async->samples_per_s;
    // Every worker's time while all of them ran, per update, times the updates in a step's worth
    // (one per worker): it adds up to the step time.
    std::set<int> workers;
    for (const auto& t : replayed.tasks)
      if (!t.is_collective && t.category != taskgraph::Category::Input) workers.insert(t.rank);
    r.breakdown = {};
    for (int w : workers)
      r.breakdown += replay::step_breakdown(replayed, r.timeline, r.work_seconds, r.work_comm_seconds, {.rank = w, .horizon = r.async->window_s, .comm_core_share = r.comm_core_share, .sms = r.comm_share_is_sms, .work_interference_seconds = &r.work_interference_seconds, .slowed_by_interference = r.comm_share_is_sms && !s.stragglers.enabled});
    r.breakdown *= 1.0 / static_cast<double>(r.async->updates);
    r.breakdown.rank = -1;
  } else {
    // The GPU that ends last, up to the end of the last step (its gradient sync, with several).
    double horizon = r.timeline.makespan;
    if (r.steps) horizon = std::accumulate(r.steps->step_times.begin(), r.steps->step_times.end(), 0.0);
    r.breakdown = replay::step_breakdown(replayed, r.timeline, r.work_seconds, r.work_comm_seconds, {.rank = -1, .horizon = horizon, .comm_core_share = r.comm_core_share, .sms = r.comm_share_is_sms, .work_interference_seconds = &r.work_interference_seconds, .slowed_by_interference = r.comm_share_is_sms && !s.stragglers.enabled});
    r.breakdown *= 1.0 / steps;  // per step, on average
  }
}

// Synchronous training: every worker waits at the next step for the chief's save. The evaluator
// reads each checkpoint once it is written; the storage serves one stream at a time, so when the
// read outlasts the steps between saves the next save waits for it.
void chief_checkpoints(Result& r, const config::Scenario& s) {
  const auto& ro = s.roles;
  RolesReport rep;
  rep.every_steps = ro.checkpoint_every_steps;
  rep.checkpoint_bytes = ro.checkpoint_bytes > 0 ? ro.checkpoint_bytes : r.memory.params + r.memory.optimizer;
  rep.save_s = rep.checkpoint_bytes / ro.storage_bandwidth;
  const double training = ro.checkpoint_every_steps * r.step_time_s;  // between saves
  if (ro.evaluator) {
    rep.evaluator_read_s = rep.checkpoint_bytes / ro.storage_bandwidth;
    if (ro.evaluator_shares_storage) rep.wait_for_storage_s = std::max(0.0, rep.evaluator_read_s - training);
  }
  rep.stall_per_step_s = (rep.save_s + rep.wait_for_storage_s) / ro.checkpoint_every_steps;
  r.step_time_s += rep.stall_per_step_s;
  r.breakdown.checkpoint = rep.stall_per_step_s;
  const double period = ro.checkpoint_every_steps * r.step_time_s;
  rep.storage_write_GBps = rep.checkpoint_bytes / period / 1e9;
  rep.storage_read_GBps = ro.evaluator ? rep.checkpoint_bytes / period / 1e9 : 0.0;
  r.roles = rep;
}

// On a torus the tensor-parallel groups run the torus's own rings only where they fill whole
// dimensions in some order (torus_layout.hpp); where none serves, say so.
void torus_alignment_warning(Result& r, const config::Scenario& s) {
  if (s.cluster.torus_dims.empty() || !torus_order(s).empty()) return;
  const auto& p = s.parallelism;
  const std::string groups = p.context > 1 ? fmt::format("{} and {} (tensor x context)", p.tensor, p.tensor * p.context)
                                           : fmt::format("{}", p.tensor);
  r.warnings.push_back(fmt::format(
      "the tensor-parallel groups of {} consecutive chips fill no whole dimensions of the torus {} in any order: "
      "their collectives take routes between scattered chips",
      groups, fmt::join(s.cluster.torus_dims, " x ")));
}

// Throughput, FLOP utilisation, warnings, failures and the capacity plan, from the step time.
void rates_and_warnings(Result& r, const config::Scenario& s) {
  torus_alignment_warning(r, s);
  r.samples_per_s = samples_per_step(r, s) / r.step_time_s;
  r.tokens_per_s = r.samples_per_s * static_cast<double>(s.model.tokens_per_sample());
  const double peak = s.device.peak_flops.at(config::compute_dtype(s.training.precision));
  r.model_tflops_per_gpu = r.model_flops / (r.step_time_s * r.gpus) / 1e12;
  r.mfu = r.model_flops / (r.step_time_s * r.gpus * peak);
  r.hfu = r.hardware_flops / (r.step_time_s * r.gpus * peak);
  const double exposed = r.breakdown.exposed_communication / r.step_time_s;
  if (exposed > 0.25)
    r.warnings.push_back(fmt::format("{:.0f}% of the step is communication that backward does not hide", 100 * exposed));
  if (s.device.kernels && s.device.kernels->noisy)
    r.warnings.push_back(fmt::format(
        "the kernel table was marked noisy when profiled (a busy machine): compute times may be high; step time "
        "{:.4g} s, band {:.4g} to {:.4g} s",
        r.step_time_s, r.step_time_s * (1 - r.compute_spread), r.step_time_s * (1 + r.compute_spread)));
  if (s.faults.enabled) {
    r.faults = faults::analyse_faults(s.faults, r.gpus, s.cluster.nodes, r.step_time_s, s.steps);
    if (r.faults->goodput < 0.9)
      r.warnings.push_back(fmt::format("failures and checkpoints leave {:.0f}% goodput", 100 * r.faults->goodput));
  }
  r.capacity = capacity_plan(r);
  if (r.timed && r.step_time_s > 0) r.range = range_report(r);
}

}  // namespace

// The pipeline: scenario -> model -> plan -> price -> replay -> result.
Result simulate(const config::Scenario& s, bool search_fewest) {
  auto t0 = std::chrono::steady_clock::now();
  check_budget(s);  // before anything is built
  Result r = plan_only(s, search_fewest);  // the model built and planned
  check_plan_budget(s, r.plan.graph);
  const auto priced = cost::price_works(r.plan.graph, s.device, config::compute_dtype(s.training.precision));
  r.work_seconds = priced.seconds;
  // What a GPU's compute loses beside its collectives, from the kernels it runs (GEMMs by their tile
  // waves over the SMs left, streams not at all), where the stack holds SMs for them.
  if (r.comm_share_is_sms)
    r.comm_core_share = cost::comm_kernel_share(s.device, r.plan.graph, config::compute_dtype(s.training.precision));
  network::Platform platform(laid_out_cluster(s));
  add_communication(r, s, platform);
  Replayed rp;
  replay_steps(r, s, platform, rp);
  measured_share(r, priced);
  step_time_and_breakdown(r, s, rp);
  if (s.roles.chief) chief_checkpoints(r, s);
  rates_and_warnings(r, s);
  r.wall_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace dtsim::results
