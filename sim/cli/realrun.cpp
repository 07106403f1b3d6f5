#include "sim/cli/realrun.hpp"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <optional>
#include <variant>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "sim/cost/roofline.hpp"
#include "models/model.hpp"
#include "sim/network/platform.hpp"
#include "sim/profile/cpu_profiler.hpp"
#include "sim/profile/timing_stats.hpp"
#include "sim/realrun/comm.hpp"
#include "sim/realrun/launch.hpp"
#include "sim/realrun/netns.hpp"
#include "sim/realrun/speed_check.hpp"
#include "sim/realrun/trainer.hpp"
#include "sim/realrun/worker.hpp"
#include "sim/replay/replay.hpp"
#include "sim/core/interrupt.hpp"

namespace dtsim::cli {

struct Realrun::State {
  CLI::App* run = nullptr;
  CLI::App* worker = nullptr;
  int workers = 2, steps = 10, warmup = 2, timeout_s = 120, repeats = 3;
  std::int64_t micro_batch = 1;
  std::string model = "tiny-gpt", algorithm = "ring", format = "text";
  double bandwidth_gbps = 0;
  realrun::WorkerOptions w;
  std::string dims;
};

namespace {

double load_average() {
  std::ifstream in("/proc/loadavg");
  double one = 0;
  in >> one;
  return one;
}

int online_cpus() { return std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN))); }

// MemAvailable from /proc/meminfo in bytes: what the kernel can give without swapping; 0 when unknown.
double available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  double kib = 0;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

// Refuses, before anything starts, a run whose workers would not fit in this machine's memory
// by dtsim's own estimate of a worker's step (step_working_set_bytes): it would otherwise fail,
// or bring the kernel's OOM killer, only once the workers are allocating.
void check_memory(const Realrun::State& o, const realrun::MlpShape& shape, bool ring) {
  const double per_worker = realrun::step_working_set_bytes(shape);
  // The parameter server holds one gradient from every worker and its own sum.
  const double server = ring ? 0.0 : 4.0 * static_cast<double>(shape.params()) * (o.workers + 1);
  const double need = o.workers * per_worker + server;
  const double available = available_memory_bytes();
  if (available <= 0 || need <= available) return;
  throw InputError("", o.micro_batch > 1 ? "--micro-batch" : "--model",
                   fmt::format("{} workers of {} at micro-batch {} need about {:.1f} GB ({:.2f} GB each{}), more than the "
                               "{:.1f} GB this machine has available (MemAvailable, /proc/meminfo); a smaller --micro-batch "
                               "or fewer --workers would fit",
                               o.workers, o.model, o.micro_batch, need / 1e9, per_worker / 1e9,
                               ring ? "" : fmt::format(", the parameter server {:.2f} GB", server / 1e9), available / 1e9));
}

struct Measured {
  double step_s = 0, allreduce_s = 0, compute_s = 0;
  // What the compute's wall time was made of: CPU time the slowest worker got (the rest, other
  // processes had its core), and how much later than the first the last worker's gradients were ready.
  double compute_cpu_s = 0, compute_spread_s = 0;
  std::vector<double> step_series, allreduce_series;
};

// Per step the slowest worker's time (the step ends for all when the exchange does), then the
// median over the steps.
Measured summarise(const std::vector<nlohmann::json>& workers) {
  Measured m;
  const std::size_t steps = workers.front()["step_s"].size();
  std::vector<double> compute, cpu, spread;
  for (std::size_t s = 0; s < steps; ++s) {
    double step = 0, ar = 0, c = 0, slowest_cpu = 0, first = 1e300, last = -1e300;
    for (const auto& w : workers) {
      step = std::max(step, w["step_s"][s].get<double>());
      ar = std::max(ar, w["allreduce_s"][s].get<double>());
      if (w["compute_s"][s].get<double>() >= c) {
        c = w["compute_s"][s].get<double>();
        slowest_cpu = w["compute_cpu_s"][s].get<double>();
      }
      first = std::min(first, w["compute_end_s"][s].get<double>());
      last = std::max(last, w["compute_end_s"][s].get<double>());
    }
    m.step_series.push_back(step);
    m.allreduce_series.push_back(ar);
    compute.push_back(c);
    cpu.push_back(slowest_cpu);
    spread.push_back(last - first);
  }
  m.step_s = profile::median_of(m.step_series);
  m.allreduce_s = profile::median_of(m.allreduce_series);
  m.compute_s = profile::median_of(compute);
  m.compute_cpu_s = profile::median_of(cpu);
  m.compute_spread_s = profile::median_of(spread);
  return m;
}

struct Predicted {
  double step_s = 0, allreduce_s = 0, compute_s = 0, update_s = 0;
  std::string backend;
};

int realrun(const Realrun::State& o) {
  if (o.workers < 2 || o.workers > 16) throw InputError("", "--workers", "between 2 and 16 worker processes");
  const bool shaping = o.bandwidth_gbps != 0;
  if (shaping) {
    if (!(o.bandwidth_gbps >= 0.001 && o.bandwidth_gbps <= 100))
      throw InputError("", "--bandwidth-Gbps", "a link rate between 0.001 and 100 Gbit/s");
    // Shaping takes network namespaces and tc: root.
    if (geteuid() != 0)
      throw InputError("", "--bandwidth-Gbps",
                       "shaping the link needs root (network namespaces and tc); run without it to use loopback as it is");
  }
  const bool ring = o.algorithm == "ring";
  const double start = realrun::steady_now(), deadline = start + o.timeout_s;
  const auto preset = config::load_model_preset(o.model);
  const auto* spec = std::get_if<models::TransformerSpec>(&preset.family);
  if (!spec) throw InputError("", "--model", fmt::format("{} is a {} model; the real trainer takes a transformer's feed-forward stack", o.model, preset.kind()));
  const auto shape = realrun::shape_of(*spec, o.micro_batch);
  if (shape.params() > (std::int64_t{1} << 28) || shape.batch * shape.dims.front() > (std::int64_t{1} << 28))
    throw InputError("", "--model", fmt::format("{} is too large to train on this machine's CPU", o.model));
  check_memory(o, shape, o.algorithm == "ring");
  try {
    profile::cpu_provenance();
  } catch (const std::runtime_error& e) {
    throw InputError("", "--model", e.what());
  }
  const int threads = std::max(1, online_cpus() / o.workers);
  const double grad_bytes = 4.0 * static_cast<double>(shape.params());
  const double load_before = load_average();

  // The real run, as one piece: a signal meanwhile (passed to the workers) ends dtsim only once
  // the workers are reaped and the shaped network, if any, is removed.
  std::string dims;
  for (auto d : shape.dims) dims += (dims.empty() ? "" : ",") + std::to_string(d);
  std::optional<realrun::ShapedNetwork> net;
  realrun::LinkMeasure link;
  std::vector<realrun::Child> children;
  std::string failure;
  {
    interrupt::Hold hold;
    try {
      // 1. The network as the trainer will use it: latency and both-ways bulk rate with the
      // gradient's size. Loopback, or a shaped link between two of the namespaces.
      if (shaping) {
        std::cerr << fmt::format("setting up a network shaped to {} Gbit/s...\n", o.bandwidth_gbps);
        net.emplace(o.workers + (ring ? 0 : 1), o.bandwidth_gbps);
        link = realrun::measure_link(std::min(grad_bytes, 64e6), net->netns_path(0), net->address(0), net->netns_path(1));
      } else {
        std::cerr << "measuring loopback...\n";
        link = realrun::measure_loopback(std::min(grad_bytes, 64e6));
      }
      // 2. The real run.
      std::cerr << fmt::format("training {} ({} parameters, {} tokens) on {} worker processes, {} thread(s) each, {}...\n",
                               o.model, shape.params(), shape.batch, o.workers, threads, o.algorithm);
      std::vector<int> fds, ports;
      const int server = o.workers;  // the parameter server's member of the shaped network
      auto args = [&](const std::string& role, int rank, int member, int peer) {
        std::vector<std::string> a{"realrun-worker", "--role", role, "--algorithm", o.algorithm, "--rank", std::to_string(rank),
                                   "--workers", std::to_string(o.workers), "--dims", dims, "--batch", std::to_string(shape.batch),
                                   "--warmup", std::to_string(o.warmup), "--steps", std::to_string(o.steps)};
        const bool listens = role == "server" || ring;
        if (shaping) {
          const std::string port = std::to_string(realrun::ShapedNetwork::kPort);
          a.insert(a.end(), {"--netns", net->netns_path(member), "--host", net->address(member), "--peer-host",
                             net->address(peer), "--listen-port", port, "--peer-port", port});
        } else {
          a.insert(a.end(), {"--listen-fd", listens ? "3" : "-1", "--peer-port", std::to_string(ports[static_cast<std::size_t>(peer == server ? 0 : peer)])});
        }
        return a;
      };
      if (!shaping)
        for (int i = 0; i < (ring ? o.workers : 1); ++i) {
          int port = 0;
          fds.push_back(realrun::listen_fd(port));
          ports.push_back(port);
        }
      try {
        auto fd = [&](int i) { return shaping ? -1 : fds[static_cast<std::size_t>(i)]; };
        if (!ring) children.push_back(realrun::spawn_self(args("server", 0, server, server), fd(0), 1));
        for (int r = 0; r < o.workers; ++r)
          children.push_back(realrun::spawn_self(args("worker", r, r, ring ? (r + 1) % o.workers : server), ring ? fd(r) : -1, threads));
      } catch (...) {
        for (int f : fds) close(f);
        throw;
      }
      for (int f : fds) close(f);
    } catch (const std::exception& e) {
      failure = e.what();
    }
    if (failure.empty())
      failure = realrun::supervise(children, deadline);
    else
      (void)realrun::supervise(children, 0);  // kill and reap what started
    net.reset();
  }
  interrupt::exit_if_pending();
  if (!failure.empty()) {
    std::cerr << fmt::format("dtsim: realrun: {}\n", failure == "timed out" ? fmt::format("timed out after {} s (--timeout); workers killed", o.timeout_s) : failure);
    return 1;
  }
  std::vector<nlohmann::json> results;
  nlohmann::json server;
  for (const auto& c : children) {
    auto j = nlohmann::json::parse(c.output);
    (j["role"] == "server" ? server : results.emplace_back()) = j;
  }
  for (const auto& r : results)
    if (r["weights"] != results.front()["weights"]) {
      std::cerr << "dtsim: realrun: the workers' weights diverged: the gradient exchange is wrong\n";
      return 1;
    }
  const auto measured = summarise(results);
  const double load_during = load_average();

  // 3. The same step simulated: kernels priced from a table profiled now, with the workers'
  // threads; the exchange on a cluster of single-device nodes whose NICs are loopback as measured.
  std::cerr << "profiling the step's kernels...\n";
  omp_set_num_threads(threads);
  const auto back = realrun::backward_kernels(shape), update = realrun::update_kernels(shape);
  std::vector<models::Kernel> all = back;
  all.insert(all.end(), update.begin(), update.end());
  profile::Options po;
  po.repeats = o.repeats;
  po.budget_s = 0.3;
  // Each kernel of a worker's step runs once on operands the rest of the step (and the other
  // workers, sharing the cache) touched since: when their working sets together exceed the
  // last-level cache, the kernels are timed cold (a sweep of twice the cache before each sample).
  // Warm, the table was 8-15 % below the workers' CPU time in compute on this project's VM.
  const double working_set = o.workers * realrun::step_working_set_bytes(shape);
  const double llc = profile::last_level_cache_bytes();
  const bool cold = llc > 0 && working_set > llc;
  if (cold) po.evict_bytes = 2 * llc;
  auto device = config::load_device_profile("cpu-epyc-2core");
  device.name = "this-cpu";
  // The workers share the machine's last-level cache, memory bandwidth and clock, and train all
  // at once: the kernels are timed while N - 1 companions run a worker's step on the other
  // workers' cores. (Timed beside idle cores, the table came out 5-15 % faster on this VM.)
  std::vector<realrun::Child> companions;
  std::string companion_failure;
  {
    interrupt::Hold hold;
    try {
      for (int r = 1; r < o.workers; ++r)
        companions.push_back(realrun::spawn_self({"realrun-worker", "--role", "companion", "--dims", dims, "--batch",
                                                  std::to_string(shape.batch)}, -1, threads));
      device.kernels = profile::profile_cpu(all, po);
    } catch (const std::exception& e) {
      companion_failure = e.what();
    }
    (void)realrun::supervise(companions, 0);  // kills and reaps them
  }
  interrupt::exit_if_pending();
  if (!companion_failure.empty()) {
    std::cerr << fmt::format("dtsim: realrun: profiling: {}\n", companion_failure);
    return 1;
  }
  std::vector<std::vector<double>> companion_steps;
  for (const auto& c : companions) companion_steps.push_back(realrun::companion_steps(c.output));
  device.launch_overhead_s.reset();
  Predicted p;
  for (const auto& k : back) p.compute_s += cost::price_kernel(device, k, "fp32").first;
  for (const auto& k : update) p.update_s += cost::price_kernel(device, k, "fp32").first;

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
  if (!ring) {
    // Loopback has no server NIC: the flows into the server are copies on the machine's cores,
    // so the server takes what two flows at once moved in the measurement, not one flow's rate.
    // A shaped network gives the server a link like every worker's.
    cluster.ps_servers = 1;
    cluster.ps_nic_bandwidth = shaping ? link.bandwidth : 2 * link.bandwidth;
  }
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
  const auto algorithm = ring ? taskgraph::Algorithm::Ring : taskgraph::Algorithm::ParameterServer;
  const int coll = g.add_collective({taskgraph::CollectiveOp::AllReduce, algorithm, {group}, grad_bytes}, "gradients", computes);
  for (int r = 0; r < o.workers; ++r) g.add_compute(r, wu, taskgraph::Category::Optimizer, "sgd", {coll});
  std::vector<double> work_s{p.compute_s, p.update_s};
  replay::ReplayInput in{g, work_s, platform};
  const auto t = replay::replay_simgrid(in);
  interrupt::reclaim();
  p.backend = t.backend;
  p.step_s = t.makespan;
  p.allreduce_s = t.end[static_cast<std::size_t>(coll)] - t.start[static_cast<std::size_t>(coll)];
  p.compute_s += p.update_s;
  const auto speed = realrun::check_speed(companion_steps, measured.compute_s, measured.compute_cpu_s, p.compute_s, o.warmup);

  auto err = [](double pred, double meas) { return meas > 0 ? 100.0 * (pred / meas - 1) : 0.0; };
  const nlohmann::ordered_json out{
      {"model", o.model},
      {"trainer", {{"kind", "mlp"}, {"dims", shape.dims}, {"tokens", shape.batch}, {"parameters", shape.params()}}},
      {"algorithm", o.algorithm},
      {"workers", o.workers},
      {"threads_per_worker", threads},
      {"steps", o.steps},
      {"warmup", o.warmup},
      {"network", shaping ? "shaped" : "loopback"},
      {"shaped_Gbps", o.bandwidth_gbps},
      {"link", {{"latency_us", link.latency_s * 1e6}, {"bandwidth_GBps", link.bandwidth / 1e9}}},
      {"measured", {{"step_s", measured.step_s}, {"allreduce_s", measured.allreduce_s}, {"compute_s", measured.compute_s},
                    {"compute_cpu_s", measured.compute_cpu_s}, {"compute_spread_s", measured.compute_spread_s},
                    {"step_series_s", measured.step_series}, {"allreduce_series_s", measured.allreduce_series}}},
      {"predicted", {{"step_s", p.step_s}, {"allreduce_s", p.allreduce_s}, {"compute_s", p.compute_s}, {"backend", p.backend}}},
      {"error_percent", {{"step", err(p.step_s, measured.step_s)}, {"allreduce", err(p.allreduce_s, measured.allreduce_s)}}},
      {"load", {{"before", load_before}, {"after_training", load_during}, {"cpus", online_cpus()}}},
      {"kernel_table_noisy", device.kernels->noisy},
      {"speed_check", {{"trusted", speed.trusted}, {"cpu_share", speed.cpu_share}, {"checked", speed.checked},
                       {"drift_percent", 100 * speed.drift}, {"training_compute_s", speed.training_compute_s},
                       {"profiling_compute_s", speed.profiling_compute_s}, {"samples", speed.samples},
                       {"table_compute_s", speed.table_compute_s}, {"table_gap_percent", 100 * speed.table_gap},
                       {"tolerance_percent", 100 * realrun::kSpeedTolerance}, {"why", speed.why}}},
      {"kernel_timing", {{"cold", cold}, {"working_set_bytes", working_set}, {"last_level_cache_bytes", llc}}},
  };
  if (!speed.trusted)
    for (const auto& why : speed.why) std::cerr << "dtsim: realrun: warning: " << why << "\n";
  if (o.format == "json") {
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format("realrun: {} on {} worker processes ({}), {} thread(s) each; trainer: MLP {} parameters, {} tokens\n",
                           o.model, o.workers, o.algorithm, threads, shape.params(), shape.batch)
            << fmt::format("{}: {:.1f} us one way, {:.2f} GB/s per direction (both ways at once)\n", shaping ? fmt::format("link shaped to {} Gbit/s", o.bandwidth_gbps) : std::string("loopback"),
                           link.latency_s * 1e6, link.bandwidth / 1e9)
            << fmt::format("{:<12} {:>12} {:>12} {:>8}\n", "", "measured_ms", "predicted_ms", "error")
            << fmt::format("{:<12} {:>12.2f} {:>12.2f} {:>+7.1f}%\n", "step", measured.step_s * 1e3, p.step_s * 1e3,
                           err(p.step_s, measured.step_s))
            << fmt::format("{:<12} {:>12.2f} {:>12.2f} {:>+7.1f}%\n", "all-reduce", measured.allreduce_s * 1e3,
                           p.allreduce_s * 1e3, err(p.allreduce_s, measured.allreduce_s))
            << fmt::format("{:<12} {:>12.2f} {:>12.2f} {:>+7.1f}%\n", "compute", measured.compute_s * 1e3, p.compute_s * 1e3,
                           err(p.compute_s, measured.compute_s))
            << fmt::format("compute: the slowest worker ran {:.2f} ms on a CPU; the last worker's gradients were ready {:.2f} ms after the first's\n",
                           measured.compute_cpu_s * 1e3, measured.compute_spread_s * 1e3)
            << fmt::format("median of {} steps after {} warm-up; load average {:.2f} before, {:.2f} after training, {} CPUs{}\n",
                           o.steps, o.warmup, load_before, load_during, online_cpus(),
                           device.kernels->noisy ? "; the kernel table is noisy (busy machine)" : "");
  std::cout << fmt::format("machine: the workers held their cores {:.0f} % of their compute's wall time", 100 * speed.cpu_share);
  if (speed.checked)
    std::cout << fmt::format("; the same compute took {:.2f} ms a step while the kernels were profiled, {:.2f} ms in training ({:+.1f} %)",
                             speed.profiling_compute_s * 1e3, speed.training_compute_s * 1e3, 100 * speed.drift)
              << fmt::format("; the kernel table prices it at {:.2f} ms ({:+.1f} %)", speed.table_compute_s * 1e3, 100 * speed.table_gap);
  std::cout << (speed.trusted ? "\n" : ": the comparison cannot be trusted\n");
  return 0;
}

int worker(Realrun::State& o) {
  std::stringstream in(o.dims);
  for (std::string d; std::getline(in, d, ',');) o.w.dims.push_back(std::stoll(d));
  std::cout << realrun::run_worker(o.w).dump() << "\n";
  return 0;
}

}  // namespace

Realrun::Realrun(CLI::App& app) : s_(std::make_shared<State>()) {
  auto& o = *s_;
  o.run = app.add_subcommand("realrun", "train for real on worker processes over loopback TCP, then predict the same step");
  o.run->add_option("--workers", o.workers, "worker processes (2-16)")->check(CLI::Range(2, 16));
  o.run->add_option("--model", o.model, "model preset whose feed-forward stack the workers train (default tiny-gpt)");
  o.run->add_option("--algorithm", o.algorithm, "ring or parameter-server")->check(CLI::IsMember({"ring", "parameter-server"}));
  o.run->add_option("--steps", o.steps, "timed steps after warm-up (median kept)")->check(CLI::Range(1, 10000));
  o.run->add_option("--warmup", o.warmup, "untimed steps first")->check(CLI::Range(0, 1000));
  o.run->add_option("--micro-batch", o.micro_batch, "sequences per worker per step")->check(CLI::Range(1, 1 << 16));
  o.run->add_option("--bandwidth-Gbps", o.bandwidth_gbps, "shape each process's link to this rate with network namespaces and tc (root only)");
  o.run->add_option("--timeout", o.timeout_s, "seconds before the workers are killed (default 120)")->check(CLI::Range(1, 86400));
  o.run->add_option("--repeats", o.repeats, "timed repetitions per kernel when profiling (default 3)")->check(CLI::Range(1, 1000));
  o.run->add_option("--format", o.format, "stdout format")->check(CLI::IsMember({"text", "json"}));
  o.worker = app.add_subcommand("realrun-worker", "")->group("");  // hidden: realrun's own processes
  o.worker->add_option("--role", o.w.role)->check(CLI::IsMember({"worker", "server", "companion"}));
  o.worker->add_option("--algorithm", o.w.algorithm)->check(CLI::IsMember({"ring", "parameter-server"}));
  o.worker->add_option("--rank", o.w.rank);
  o.worker->add_option("--workers", o.w.workers);
  o.worker->add_option("--listen-fd", o.w.listen_fd);
  o.worker->add_option("--peer-port", o.w.peer_port);
  o.worker->add_option("--peer-host", o.w.peer_host);
  o.worker->add_option("--netns", o.w.netns);
  o.worker->add_option("--host", o.w.host);
  o.worker->add_option("--listen-port", o.w.listen_port);
  o.worker->add_option("--dims", o.dims)->required();
  o.worker->add_option("--batch", o.w.batch);
  o.worker->add_option("--warmup", o.w.warmup);
  o.worker->add_option("--steps", o.w.steps);
}

int Realrun::dispatch() {
  if (*s_->run) return realrun(*s_);
  if (*s_->worker) return worker(*s_);
  return -1;
}

}  // namespace dtsim::cli
