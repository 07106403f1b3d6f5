#include "sim/realrun/worker.hpp"

#include <malloc.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <ctime>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "sim/realrun/comm.hpp"
#include "sim/realrun/netns.hpp"
#include "sim/realrun/trainer.hpp"

namespace dtsim::realrun {

namespace {

// 1,000 lines of at most 40 bytes stay under a pipe's 64 KiB.
constexpr int kCompanionLines = 1000;

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
// CPU seconds this process ran (user and system): below the wall time, something else had its core.
double cpu_now() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

nlohmann::json serve(const WorkerOptions& o, tcp::acceptor& acceptor, asio::io_context& io) {
  // Workers say their rank first, so the sum runs in rank order whatever order they connect in.
  std::vector<tcp::socket> by_rank;
  std::vector<tcp::socket> any;
  std::vector<std::int32_t> ranks(static_cast<std::size_t>(o.workers));
  for (int i = 0; i < o.workers; ++i) {
    any.push_back(accept_one(acceptor));
    asio::read(any.back(), asio::buffer(&ranks[static_cast<std::size_t>(i)], sizeof(std::int32_t)));
  }
  for (int r = 0; r < o.workers; ++r)
    for (std::size_t i = 0; i < any.size(); ++i)
      if (ranks[i] == r) by_rank.push_back(std::move(any[i]));
  if (static_cast<int>(by_rank.size()) != o.workers) throw std::runtime_error("parameter server: workers' ranks are not 0..N-1");
  MlpShape s{o.batch, o.dims};
  std::vector<double> rounds;
  std::vector<std::vector<float>> in(by_rank.size(), std::vector<float>(static_cast<std::size_t>(s.params())));
  for (int step = 0; step < o.warmup + o.steps; ++step) {
    const double t = now();
    ps_serve_round(io, by_rank, in);
    if (step >= o.warmup) rounds.push_back(now() - t);
  }
  return {{"role", "server"}, {"round_s", rounds}};
}

// The companion: keeps a worker's cores busy with a worker's step while the kernels are
// profiled, until the realrun command kills it.
nlohmann::json run_companion(const WorkerOptions& o) {
  // Each step's wall and CPU time go out as a line, so realrun can compare the machine's speed
  // now with the workers' in training (speed_check.hpp). The lines stop before they could fill
  // the pipe: a blocked companion would leave its cores idle.
  Mlp mlp(MlpShape{o.batch, o.dims}, o.seed);
  std::vector<float> grad(static_cast<std::size_t>(mlp.params()));
  for (int step = 0;; ++step) {
    const double t0 = now(), c0 = cpu_now();
    mlp.gradients(grad);
    mlp.apply(grad, 0.0f);
    if (step < kCompanionLines) {
      const std::string line = fmt::format("{:.9f} {:.9f}\n", now() - t0, cpu_now() - c0);
      if (write(STDOUT_FILENO, line.data(), line.size()) < 0) return {};
    }
  }
}

}  // namespace

nlohmann::json run_worker(const WorkerOptions& o) {
  // Never outlive the realrun command, whatever ends it.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() == 1) throw std::runtime_error("the realrun command is gone");
  if (!o.netns.empty()) enter_netns(o.netns);
  // Freed memory stays with the process, as a framework's caching allocator keeps it: Eigen's
  // products allocate their packing buffers on every call, and glibc gave them back to the kernel
  // between layers, so every step paid fresh pages' faults that the profiler, repeating one
  // kernel on buffers it reuses, never times.
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  asio::io_context io;
  tcp::acceptor acceptor(io);
  if (o.listen_fd >= 0) {
    acceptor.assign(tcp::v4(), o.listen_fd);
  } else if (!o.host.empty() && (o.role == "server" || o.algorithm == "ring")) {
    acceptor.open(tcp::v4());
    acceptor.set_option(tcp::acceptor::reuse_address(true));
    acceptor.bind(tcp::endpoint(asio::ip::make_address_v4(o.host), static_cast<unsigned short>(o.listen_port)));
    acceptor.listen();
  }
  // Peers in other namespaces may not listen yet: retry a while (the command's timeout bounds it).
  constexpr double kPatience = 60;
  if (o.role == "server") return serve(o, acceptor, io);
  if (o.role == "companion") return run_companion(o);

  MlpShape shape{o.batch, o.dims};
  Mlp mlp(shape, o.seed);  // every worker starts from the same weights
  std::vector<float> grad(static_cast<std::size_t>(mlp.params()));
  tcp::socket next(io), prev(io), server(io);
  const bool ring = o.algorithm == "ring";
  if (ring) {
    if (o.workers > 1) {
      next = connect_to(io, o.peer_host, static_cast<unsigned short>(o.peer_port), kPatience);
      prev = accept_one(acceptor);
    }
  } else {
    server = connect_to(io, o.peer_host, static_cast<unsigned short>(o.peer_port), kPatience);
    const std::int32_t r = o.rank;
    asio::write(server, asio::buffer(&r, sizeof r));
  }
  const float lr = 1e-4f / static_cast<float>(o.workers);  // the mean gradient: the sum over workers / N
  std::vector<double> step_s, allreduce_s, compute_s, compute_cpu_s, compute_end_s;
  for (int step = 0; step < o.warmup + o.steps; ++step) {
    const double t0 = now(), c0 = cpu_now();
    mlp.gradients(grad);
    const double t1 = now(), c1 = cpu_now();
    if (ring)
      ring_allreduce(io, grad, o.rank, o.workers, next, prev);
    else
      ps_push_pull(io, grad, server);
    const double t2 = now(), c2 = cpu_now();
    mlp.apply(grad, lr);
    const double t3 = now(), c3 = cpu_now();
    if (step >= o.warmup) {
      step_s.push_back(t3 - t0);
      allreduce_s.push_back(t2 - t1);
      compute_s.push_back((t1 - t0) + (t3 - t2));
      compute_cpu_s.push_back((c1 - c0) + (c3 - c2));
      compute_end_s.push_back(t1);  // the steady clock is the machine's: comparable across workers
    }
  }
  return {{"role", "worker"}, {"rank", o.rank}, {"step_s", step_s}, {"allreduce_s", allreduce_s},
          {"compute_s", compute_s}, {"compute_cpu_s", compute_cpu_s}, {"compute_end_s", compute_end_s},
          {"weights", mlp.weights(8)}};
}

}  // namespace dtsim::realrun
