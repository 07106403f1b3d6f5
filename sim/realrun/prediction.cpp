// realrun's second half: the step the workers ran, simulated. Kernels are priced from a table
// profiled now, with the workers' threads; the exchange is replayed on a cluster of single-device
// nodes whose NICs are the link as measured.
#include <fmt/format.h>
#include <omp.h>

#include <iostream>

#include "sim/config/scenario.hpp"
#include "sim/core/interrupt.hpp"
#include "sim/network/algorithm_registry.hpp"
#include "sim/cost/roofline.hpp"
#include "sim/network/platform.hpp"
#include "sim/profile/cpu_profiler.hpp"
#include "sim/realrun/launch.hpp"
#include "sim/realrun/session.hpp"
#include "sim/replay/replay.hpp"

namespace dtsim::realrun {

namespace {

// The workers share the machine's last-level cache, memory bandwidth and clock, and train all
// at once: the kernels are timed while N - 1 companions run a worker's step on the other
// workers' cores. (Timed beside idle cores, the table came out 5-15 % faster on this VM.)
// Returns each companion's step times.
std::vector<std::vector<double>> profile_beside_companions(const SessionOptions& o, const MlpShape& shape, int threads,
                                                           const std::vector<models::Kernel>& all, const profile::Options& po,
                                                           cost::DeviceProfile& device) {
  std::vector<Child> companions;
  std::string companion_failure;
  {
    interrupt::Hold hold;
    try {
      for (int r = 1; r < o.workers; ++r)
        companions.push_back(spawn_self({"realrun-worker", "--role", "companion", "--dims", dims_arg(shape), "--batch",
                                         std::to_string(shape.batch)}, -1, threads));
      device.kernels = profile::profile_cpu(all, po);
    } catch (const std::exception& e) {
      companion_failure = e.what();
    }
    (void)supervise(companions, 0);  // kills and reaps them
  }
  interrupt::exit_if_pending();
  if (!companion_failure.empty()) throw Failure(fmt::format("profiling: {}", companion_failure));
  std::vector<std::vector<double>> companion_steps;
  for (const auto& c : companions) companion_steps.push_back(realrun::companion_steps(c.output));
  return companion_steps;
}

network::ClusterSpec loopback_cluster(const SessionOptions& o, const LinkMeasure& link, const cost::DeviceProfile& device) {
  network::ClusterSpec cluster;
  cluster.name = "loopback";
  cluster.nodes = o.workers;
  cluster.gpus_per_node = 1;
  cluster.nics_per_node = 1;
  cluster.nic_bandwidth = link.bandwidth;
  cluster.inter_latency = link.latency_s;
  cluster.intra_bandwidth = link.bandwidth;
  cluster.intra_latency = link.latency_s;
  cluster.topology = network::Topology::SingleSwitch;
  cluster.host_memory_bandwidth = device.hbm_bandwidth;
  if (o.algorithm != "ring") {
    // Loopback has no server NIC: the flows into the server are copies on the machine's cores,
    // so the server takes what two flows at once moved in the measurement, not one flow's rate.
    // A shaped network gives the server a link like every worker's.
    cluster.ps_servers = 1;
    cluster.ps_nic_bandwidth = o.bandwidth_gbps != 0 ? link.bandwidth : 2 * link.bandwidth;
  }
  return cluster;
}

// Every worker's forward+backward, the gradients' all-reduce, every worker's update, replayed on
// SimGrid; fills the step and all-reduce times of `p`.
void replay_step(const SessionOptions& o, const network::ClusterSpec& cluster, const std::vector<models::Kernel>& back,
                 const std::vector<models::Kernel>& update, double grad_bytes, Predicted& p) {
  network::Platform platform(cluster);
  taskgraph::TaskGraph g;
  g.num_ranks = o.workers;
  std::vector<int> ranks;
  for (int r = 0; r < o.workers; ++r) ranks.push_back(r);
  const int group = g.add_group(ranks);
  const int wb = g.add_work({"forward+backward", back, 1, {}, 0});
  const int wu = g.add_work({"sgd", update, 1, {}, 0});
  std::vector<int> computes;
  for (int r = 0; r < o.workers; ++r) computes.push_back(g.add_compute(r, wb, taskgraph::Category::Compute, "fwd+bwd", {}));
  const auto algorithm = network::algorithm_named(o.algorithm).value_or(taskgraph::Algorithm::ParameterServer);
  const int coll = g.add_collective({taskgraph::CollectiveOp::AllReduce, algorithm, {group}, grad_bytes}, "gradients", computes);
  for (int r = 0; r < o.workers; ++r) g.add_compute(r, wu, taskgraph::Category::Optimizer, "sgd", {coll});
  std::vector<double> work_s{p.compute_s, p.update_s};
  replay::ReplayInput in{g, work_s, platform};
  const auto t = replay::replay_simgrid(in);
  interrupt::reclaim();
  p.backend = t.backend;
  p.step_s = t.makespan;
  p.allreduce_s = t.end[static_cast<std::size_t>(coll)] - t.start[static_cast<std::size_t>(coll)];
}

}  // namespace

void predict(const SessionOptions& o, const RealRun& run, Comparison& c) {
  std::cerr << "profiling the step's kernels...\n";
  omp_set_num_threads(c.threads);
  const auto back = backward_kernels(c.shape), update = update_kernels(c.shape);
  std::vector<models::Kernel> all = back;
  all.insert(all.end(), update.begin(), update.end());
  profile::Options po;
  po.repeats = o.repeats;
  po.budget_s = 0.3;
  // Each kernel of a worker's step runs once on operands the rest of the step (and the other
  // workers, sharing the cache) touched since: when their working sets together exceed the
  // last-level cache, the kernels are timed cold (a sweep of twice the cache before each sample).
  // Warm, the table was 8-15 % below the workers' CPU time in compute on this project's VM.
  c.working_set = o.workers * step_working_set_bytes(c.shape);
  c.llc = profile::last_level_cache_bytes();
  c.cold = c.llc > 0 && c.working_set > c.llc;
  if (c.cold) po.evict_bytes = 2 * c.llc;
  auto device = config::load_device_profile("cpu-epyc-2core");
  device.name = "this-cpu";
  const auto companion_steps = profile_beside_companions(o, c.shape, c.threads, all, po, device);
  device.launch_overhead_s.reset();
  c.table_noisy = device.kernels->noisy;
  Predicted& p = c.predicted;
  for (const auto& k : back) p.compute_s += cost::price_kernel(device, k, "fp32").first;
  for (const auto& k : update) p.update_s += cost::price_kernel(device, k, "fp32").first;
  replay_step(o, loopback_cluster(o, run.link, device), back, update, 4.0 * static_cast<double>(c.shape.params()), p);
  p.compute_s += p.update_s;
  c.speed = check_speed(companion_steps, run.measured.compute_s, run.measured.compute_cpu_s, p.compute_s, o.warmup);
}

}  // namespace dtsim::realrun
