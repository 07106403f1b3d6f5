// realrun's first half: the options checked against this machine, then the workers' real run
// (the network measured, the processes started and supervised, their reports summarised).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "models/model.hpp"
#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "sim/core/interrupt.hpp"
#include "sim/profile/cpu_profiler.hpp"
#include "sim/profile/timing_stats.hpp"
#include "sim/realrun/launch.hpp"
#include "sim/realrun/netns.hpp"
#include "sim/realrun/session.hpp"

namespace dtsim::realrun {

double load_average() {
  std::ifstream in("/proc/loadavg");
  double one = 0;
  in >> one;
  return one;
}

int online_cpus() { return std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN))); }

std::string dims_arg(const MlpShape& shape) {
  std::string dims;
  for (auto d : shape.dims) {
    if (!dims.empty()) dims += ',';  // not "," + to_string(d): GCC 12 warns on that falsely (-Wrestrict)
    dims += std::to_string(d);
  }
  return dims;
}

namespace {

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
void check_memory(const SessionOptions& o, const MlpShape& shape, bool ring) {
  const double per_worker = step_working_set_bytes(shape);
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

// The worker processes' command lines: ranks, the trainer's shape, and where each listens and
// connects (a socket handed down on loopback, addresses in the shaped network).
struct WorkerArgs {
  const SessionOptions& o;
  const MlpShape& shape;
  const std::string& dims;
  const std::optional<ShapedNetwork>& net;
  const std::vector<int>& ports;

  std::vector<std::string> operator()(const std::string& role, int rank, int member, int peer) const {
    const bool ring = o.algorithm == "ring";
    const int server = o.workers;  // the parameter server's member of the shaped network
    std::vector<std::string> a{"realrun-worker", "--role", role, "--algorithm", o.algorithm, "--rank", std::to_string(rank),
                               "--workers", std::to_string(o.workers), "--dims", dims, "--batch", std::to_string(shape.batch),
                               "--warmup", std::to_string(o.warmup), "--steps", std::to_string(o.steps)};
    const bool listens = role == "server" || ring;
    if (net) {
      const std::string port = std::to_string(ShapedNetwork::kPort);
      a.insert(a.end(), {"--netns", net->netns_path(member), "--host", net->address(member), "--peer-host",
                         net->address(peer), "--listen-port", port, "--peer-port", port});
    } else {
      a.insert(a.end(), {"--listen-fd", listens ? "3" : "-1", "--peer-port", std::to_string(ports[static_cast<std::size_t>(peer == server ? 0 : peer)])});
    }
    return a;
  }
};

// The network as the trainer will use it: latency and both-ways bulk rate with the gradient's
// size. Loopback, or a shaped link between two of the namespaces (made here, into `net`).
LinkMeasure measure_network(const SessionOptions& o, double grad_bytes, std::optional<ShapedNetwork>& net) {
  if (o.bandwidth_gbps != 0) {
    std::cerr << fmt::format("setting up a network shaped to {} Gbit/s...\n", o.bandwidth_gbps);
    net.emplace(o.workers + (o.algorithm == "ring" ? 0 : 1), o.bandwidth_gbps);
    return measure_link(std::min(grad_bytes, 64e6), net->netns_path(0), net->address(0), net->netns_path(1));
  }
  std::cerr << "measuring loopback...\n";
  return measure_loopback(std::min(grad_bytes, 64e6));
}

// The workers (and the parameter server) started, into `children`.
void start_workers(const SessionOptions& o, const MlpShape& shape, int threads, const std::optional<ShapedNetwork>& net,
                   std::vector<Child>& children) {
  const bool ring = o.algorithm == "ring", shaping = net.has_value();
  std::cerr << fmt::format("training {} ({} parameters, {} tokens) on {} worker processes, {} thread(s) each, {}...\n",
                           o.model, shape.params(), shape.batch, o.workers, threads, o.algorithm);
  std::vector<int> fds, ports;
  const int server = o.workers;
  const std::string dims = dims_arg(shape);
  const WorkerArgs args{o, shape, dims, net, ports};
  if (!shaping)
    for (int i = 0; i < (ring ? o.workers : 1); ++i) {
      int port = 0;
      fds.push_back(listen_fd(port));
      ports.push_back(port);
    }
  try {
    auto fd = [&](int i) { return shaping ? -1 : fds[static_cast<std::size_t>(i)]; };
    if (!ring) children.push_back(spawn_self(args("server", 0, server, server), fd(0), 1));
    for (int r = 0; r < o.workers; ++r)
      children.push_back(spawn_self(args("worker", r, r, ring ? (r + 1) % o.workers : server), ring ? fd(r) : -1, threads));
  } catch (...) {
    for (int f : fds) close(f);
    throw;
  }
  for (int f : fds) close(f);
}

// The workers' reports, checked: every worker ends with the same weights.
std::vector<nlohmann::json> worker_reports(const std::vector<Child>& children) {
  std::vector<nlohmann::json> results;
  nlohmann::json server;
  for (const auto& c : children) {
    auto j = nlohmann::json::parse(c.output);
    (j["role"] == "server" ? server : results.emplace_back()) = j;
  }
  for (const auto& r : results)
    if (r["weights"] != results.front()["weights"]) throw Failure("the workers' weights diverged: the gradient exchange is wrong");
  return results;
}

}  // namespace

MlpShape check_session(const SessionOptions& o) {
  const auto preset = config::load_model_preset(o.model);
  const auto* spec = preset.transformer();
  if (!spec) throw InputError("", "--model", fmt::format("{} is a {} model; the real trainer takes a transformer's feed-forward stack", o.model, preset.kind()));
  const auto shape = shape_of(*spec, o.micro_batch);
  if (shape.params() > (std::int64_t{1} << 28) || shape.batch * shape.dims.front() > (std::int64_t{1} << 28))
    throw InputError("", "--model", fmt::format("{} is too large to train on this machine's CPU", o.model));
  check_memory(o, shape, o.algorithm == "ring");
  try {
    profile::cpu_provenance();
  } catch (const std::runtime_error& e) {
    throw InputError("", "--model", e.what());
  }
  return shape;
}

// The real run, as one piece: a signal meanwhile (passed to the workers) ends dtsim only once
// the workers are reaped and the shaped network, if any, is removed.
RealRun train(const SessionOptions& o, const MlpShape& shape, int threads, double deadline_s) {
  RealRun run;
  std::optional<ShapedNetwork> net;
  std::vector<Child> children;
  std::string failure;
  {
    interrupt::Hold hold;
    try {
      run.link = measure_network(o, 4.0 * static_cast<double>(shape.params()), net);
      start_workers(o, shape, threads, net, children);
    } catch (const std::exception& e) {
      failure = e.what();
    }
    if (failure.empty())
      failure = supervise(children, deadline_s);
    else
      (void)supervise(children, 0);  // kill and reap what started
    net.reset();
  }
  interrupt::exit_if_pending();
  if (!failure.empty())
    throw Failure(failure == "timed out" ? fmt::format("timed out after {} s (--timeout); workers killed", o.timeout_s) : failure);
  run.measured = summarise(worker_reports(children));
  run.load_during = load_average();
  return run;
}

}  // namespace dtsim::realrun
