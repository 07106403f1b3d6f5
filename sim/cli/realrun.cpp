// `dtsim realrun` and its hidden `realrun-worker`: the flags, and the comparison printed. The run
// itself is sim/realrun/session.hpp's.
#include "sim/cli/realrun.hpp"

#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/realrun/session.hpp"
#include "sim/realrun/worker.hpp"

namespace dtsim::cli {

struct Realrun::State {
  CLI::App* run = nullptr;
  CLI::App* worker = nullptr;
  realrun::SessionOptions session;
  std::string format = "text";
  realrun::WorkerOptions w;
  std::string dims;
};

namespace {

double error_percent(double pred, double meas) { return meas > 0 ? 100.0 * (pred / meas - 1) : 0.0; }

nlohmann::ordered_json to_json(const realrun::SessionOptions& o, const realrun::Comparison& c) {
  const auto& m = c.measured;
  const auto& p = c.predicted;
  const auto& speed = c.speed;
  return {
      {"model", o.model},
      {"trainer", {{"kind", "mlp"}, {"dims", c.shape.dims}, {"tokens", c.shape.batch}, {"parameters", c.shape.params()}}},
      {"algorithm", o.algorithm},
      {"workers", o.workers},
      {"threads_per_worker", c.threads},
      {"steps", o.steps},
      {"warmup", o.warmup},
      {"network", c.shaping ? "shaped" : "loopback"},
      {"shaped_Gbps", o.bandwidth_gbps},
      {"link", {{"latency_us", c.link.latency_s * 1e6}, {"bandwidth_GBps", c.link.bandwidth / 1e9}}},
      {"measured", {{"step_s", m.step_s}, {"allreduce_s", m.allreduce_s}, {"compute_s", m.compute_s},
                    {"compute_cpu_s", m.compute_cpu_s}, {"compute_spread_s", m.compute_spread_s},
                    {"step_series_s", m.step_series}, {"allreduce_series_s", m.allreduce_series}}},
      {"predicted", {{"step_s", p.step_s}, {"allreduce_s", p.allreduce_s}, {"compute_s", p.compute_s}, {"backend", p.backend}}},
      {"error_percent", {{"step", error_percent(p.step_s, m.step_s)}, {"allreduce", error_percent(p.allreduce_s, m.allreduce_s)}}},
      {"load", {{"before", c.load_before}, {"after_training", c.load_during}, {"cpus", c.cpus}}},
      {"kernel_table_noisy", c.table_noisy},
      {"speed_check", {{"trusted", speed.trusted}, {"cpu_share", speed.cpu_share}, {"checked", speed.checked},
                       {"drift_percent", 100 * speed.drift}, {"training_compute_s", speed.training_compute_s},
                       {"profiling_compute_s", speed.profiling_compute_s}, {"samples", speed.samples},
                       {"table_compute_s", speed.table_compute_s}, {"table_gap_percent", 100 * speed.table_gap},
                       {"tolerance_percent", 100 * realrun::kSpeedTolerance}, {"why", speed.why}}},
      {"kernel_timing", {{"cold", c.cold}, {"working_set_bytes", c.working_set}, {"last_level_cache_bytes", c.llc}}},
  };
}

void print_text(const realrun::SessionOptions& o, const realrun::Comparison& c) {
  const auto& m = c.measured;
  const auto& p = c.predicted;
  const auto& speed = c.speed;
  std::cout << fmt::format("realrun: {} on {} worker processes ({}), {} thread(s) each; trainer: MLP {} parameters, {} tokens\n",
                           o.model, o.workers, o.algorithm, c.threads, c.shape.params(), c.shape.batch)
            << fmt::format("{}: {:.1f} us one way, {:.2f} GB/s per direction (both ways at once)\n", c.shaping ? fmt::format("link shaped to {} Gbit/s", o.bandwidth_gbps) : std::string("loopback"),
                           c.link.latency_s * 1e6, c.link.bandwidth / 1e9)
            << fmt::format("{:<12} {:>12} {:>12} {:>8}\n", "", "measured_ms", "predicted_ms", "error")
            << fmt::format("{:<12} {:>12.2f} {:>12.2f} {:>+7.1f}%\n", "step", m.step_s * 1e3, p.step_s * 1e3,
                           error_percent(p.step_s, m.step_s))
            << fmt::format("{:<12} {:>12.2f} {:>12.2f} {:>+7.1f}%\n", "all-reduce", m.allreduce_s * 1e3,
                           p.allreduce_s * 1e3, error_percent(p.allreduce_s, m.allreduce_s))
            << fmt::format("{:<12} {:>12.2f} {:>12.2f} {:>+7.1f}%\n", "compute", m.compute_s * 1e3, p.compute_s * 1e3,
                           error_percent(p.compute_s, m.compute_s))
            << fmt::format("compute: the slowest worker ran {:.2f} ms on a CPU; the last worker's gradients were ready {:.2f} ms after the first's\n",
                           m.compute_cpu_s * 1e3, m.compute_spread_s * 1e3)
            << fmt::format("median of {} steps after {} warm-up; load average {:.2f} before, {:.2f} after training, {} CPUs{}\n",
                           o.steps, o.warmup, c.load_before, c.load_during, c.cpus,
                           c.table_noisy ? "; the kernel table is noisy (busy machine)" : "");
  std::cout << fmt::format("machine: the workers held their cores {:.0f} % of their compute's wall time", 100 * speed.cpu_share);
  if (speed.checked)
    std::cout << fmt::format("; the same compute took {:.2f} ms a step while the kernels were profiled, {:.2f} ms in training ({:+.1f} %)",
                             speed.profiling_compute_s * 1e3, speed.training_compute_s * 1e3, 100 * speed.drift)
              << fmt::format("; the kernel table prices it at {:.2f} ms ({:+.1f} %)", speed.table_compute_s * 1e3, 100 * speed.table_gap);
  std::cout << (speed.trusted ? "\n" : ": the comparison cannot be trusted\n");
}

int realrun(const Realrun::State& o) {
  realrun::Comparison c;
  try {
    c = realrun::train_and_predict(o.session);
  } catch (const realrun::Failure& e) {
    std::cerr << fmt::format("dtsim: realrun: {}\n", e.what());
    return 1;
  }
  if (!c.speed.trusted)
    for (const auto& why : c.speed.why) std::cerr << "dtsim: realrun: warning: " << why << "\n";
  if (o.format == "json") std::cout << to_json(o.session, c).dump(2) << "\n";
  else print_text(o.session, c);
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
  auto& so = o.session;
  o.run = app.add_subcommand("realrun", "train for real on worker processes over loopback TCP, then predict the same step");
  o.run->add_option("--workers", so.workers, "worker processes (2-16)")->check(CLI::Range(2, 16));
  o.run->add_option("--model", so.model, "model preset whose feed-forward stack the workers train (default tiny-gpt)");
  o.run->add_option("--algorithm", so.algorithm, "ring or parameter-server")->check(CLI::IsMember({"ring", "parameter-server"}));
  o.run->add_option("--steps", so.steps, "timed steps after warm-up (median kept)")->check(CLI::Range(1, 10000));
  o.run->add_option("--warmup", so.warmup, "untimed steps first")->check(CLI::Range(0, 1000));
  o.run->add_option("--micro-batch", so.micro_batch, "sequences per worker per step")->check(CLI::Range(1, 1 << 16));
  o.run->add_option("--bandwidth-Gbps", so.bandwidth_gbps, "shape each process's link to this rate with network namespaces and tc (root only)");
  o.run->add_option("--timeout", so.timeout_s, "seconds before the workers are killed (default 120)")->check(CLI::Range(1, 86400));
  o.run->add_option("--repeats", so.repeats, "timed repetitions per kernel when profiling (default 3)")->check(CLI::Range(1, 1000));
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
