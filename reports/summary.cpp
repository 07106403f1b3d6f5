#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <string_view>

#include "reports/reports.hpp"
#include "sim/network/algorithm_registry.hpp"
#include "sim/results/kernel_view.hpp"
#include "sim/results/torus_layout.hpp"
#include "strategies/settings.hpp"
#include "sim/core/units.hpp"

namespace dtsim::reports {

namespace {

std::string bar(double fraction, int width = 30) {
  int n = static_cast<int>(std::clamp(fraction, 0.0, 1.0) * width + 0.5);
  std::string s;
  for (int i = 0; i < n; ++i) s += "\u2588";
  return s;
}

std::string gib(double bytes) { return fmt::format("{:7.2f} GiB", bytes / units::kGiB); }

// How gradients cross the network, as configured and as the buckets ran where that differs.
std::string gradient_sync(const results::Result& r) {
  const auto& p = r.scenario_spec.parallelism;
  if (r.gradient_sync_runs_as.empty() && p.compression == strategies::Compression::None) return "";
  const std::string configured = network::algorithm_name(p.algorithm);
  std::string out = fmt::format("  gradients: {} algorithm, compression {}", configured, strategies::to_string(p.compression));
  if (p.compression == strategies::Compression::TopK) out += fmt::format(" (ratio {:g})", p.topk_ratio);
  const auto& ran = r.gradient_sync_runs_as;
  if (!ran.empty() && !(ran.size() == 1 && ran.begin()->first == configured)) {
    std::string as;
    for (const auto& [how, n] : ran) as += fmt::format("{}{} x{}", as.empty() ? "" : ", ", how, n);
    out += "; buckets ran as " + as;
  }
  return out + "\n";
}

// The recomputation as the scenario named it: selective with Megatron-Core's modules where given.
std::string recompute_text(const strategies::ParallelismSpec& p) {
  if (!p.recompute_modules || p.recompute != strategies::Recompute::Selective) return strategies::to_string(p.recompute);
  const auto modules = strategies::recompute_module_list(p.recompute_modules);
  return fmt::format("{} ({})", strategies::to_string(p.recompute), modules.empty() ? "no modules" : fmt::format("{}", fmt::join(modules, ", ")));
}

// A torus's shape, its pods, and the order its chips were laid out in where that is not the
// scenario's own (results::torus_order).
std::string torus_text(const config::Scenario& s) {
  const auto& dims = s.cluster.torus_dims;
  if (dims.empty()) return "";
  std::string out = fmt::format("; torus {}", fmt::join(dims, " x "));
  if (s.cluster.torus_pods > 1) out += fmt::format(", {} pods", s.cluster.torus_pods);
  if (const auto laid = results::torus_order(s); !laid.empty() && laid != dims)
    out += fmt::format(", laid out {} for the tensor groups", fmt::join(laid, " x "));
  return out;
}

// What ZeRO's stage leaves unsaid: HSDP (ZeRO-3 inside groups of shard_size data ranks,
// replicated across them), or ZeRO-1/2's parameter gather overlapped with the next forward.
std::string zero_detail(const strategies::ParallelismSpec& p) {
  if (p.overlap_param_gather) return " (parameter gather overlapped with the forward)";
  if (p.zero_stage != 3 || p.shard_size <= 0 || p.shard_size >= p.data) return "";
  return fmt::format(" (HSDP: sharded over {}, {} replicas)", p.shard_size, p.data / p.shard_size);
}

// What the software runs beside the split, where it is not the default: the framework, ZeRO and
// recomputation (the pipeline line says those when there is a pipeline) and the stack.
std::string software(const config::Scenario& s) {
  const auto& p = s.parallelism;
  std::vector<std::string> parts;
  if (p.framework.framework != strategies::Framework::MegatronLM)
    parts.push_back(fmt::format("framework {}", strategies::to_string(p.framework.framework)));
  if (p.pipeline == 1 && p.zero_stage > 0) parts.push_back(fmt::format("zero stage {}{}", p.zero_stage, zero_detail(p)));
  if (p.pipeline == 1 && p.recompute != strategies::Recompute::None)
    parts.push_back(fmt::format("recompute {}", recompute_text(p)));
  if (p.moe_dispatcher == strategies::ParallelismSpec::MoeDispatcher::DeepEp) parts.push_back("DeepEP dispatch");
  if (p.moe_fp8_dispatch) parts.push_back("FP8 dispatch");
  if (p.moe_shared_expert_overlap) parts.push_back("shared experts beside the all-to-alls");
  if (s.device.stack.name != "default") parts.push_back(fmt::format("stack {}", s.device.stack.name));
  return parts.empty() ? "" : fmt::format("  {}\n", fmt::join(parts, ", "));
}

}  // namespace

// Every dimension the GPUs are split along; experts split the data-parallel replicas (and the
// context ranks, and the tensor ranks where expert_tensor folds them).
std::string parallel_dimensions(const strategies::ParallelismSpec& p) {
  std::string out = fmt::format("data {}", p.data);
  if (p.context > 1) out += fmt::format(" x context {}", p.context);
  out += fmt::format(" x tensor {} x pipeline {}", p.tensor, p.pipeline);
  if (p.expert == 1) return out;
  std::string over = p.expert_tensor_size() != p.tensor ? "tensor x " : "";
  if (p.context > 1) over += "context x ";
  return out + fmt::format(" (expert {} within {}data)", p.expert, over);
}

namespace {

// A plan that does not fit runs out of memory: its rates are what it would do with enough memory,
// and must not read as what it does.
std::string achievable_rates(const results::Result& r) {
  if (!r.fits)
    return "throughput     not achievable: does not fit\nmodel TFLOP/s  not achievable: does not fit (MFU, HFU likewise)\n";
  std::string out;
  if (r.scenario_spec.model.tokens_per_sample() > 0)
    out += fmt::format("throughput     {:10.1f} samples/s   {:.0f} tokens/s\n", r.samples_per_s, r.tokens_per_s);
  else
    out += fmt::format("throughput     {:10.1f} samples/s\n", r.samples_per_s);
  return out + fmt::format("model TFLOP/s  {:10.1f} per GPU     MFU {:.1f}%   HFU {:.1f}%\n", r.model_tflops_per_gpu,
                           100 * r.mfu, 100 * r.hfu);
}

// Per GPU: the parts, and where the stack names an allocator what PyTorch and nvidia-smi read.
std::string memory_lines(const results::Result& r) {
  const auto& m = r.memory;
  const double whole = r.device_peak();
  std::string out = fmt::format("\nmemory per GPU (rank {}): {} of {}  {}\n", r.worst_rank, gib(whole), gib(r.capacity_bytes),
                                r.fits ? "fits" : "DOES NOT FIT");
  for (auto [name, v] : {std::pair{"parameters", m.params}, {"gradients", m.gradients}, {"optimizer state", m.optimizer},
                         {"activations", m.activations}, {"other", m.other}, {"allocator cache", r.allocator_slack}})
    if (std::string_view(name) != "allocator cache" || v > 0)
      out += fmt::format("  {:<22} {}  {}\n", name, gib(v), bar(v / std::max(r.capacity_bytes, whole)));
  const auto& s = r.scenario_spec;
  if (s.training.memory.allocator == strategies::Allocator::None) return out;
  const double allocated = m.peak() - s.reserved_bytes;
  auto gb = [](double b) { return fmt::format("{:.2f} GiB", b / units::kGiB); };
  return out + fmt::format("  {} allocator: allocated peak {} (torch.cuda.max_memory_allocated), reserved peak {} "
                           "(max_memory_reserved), {} with the CUDA context (nvidia-smi)\n",
                           strategies::to_string(s.training.memory.allocator), gb(allocated),
                           gb(allocated + r.allocator_slack), gb(whole));
}

}  // namespace

std::string does_not_fit(const results::Result& r) {
  const double peak = r.device_peak();
  return fmt::format("DOES NOT FIT: GPU {} needs {:.2f} GiB, the device has {:.2f} GiB ({:.2f} GiB, {:.0f}% over)",
                     r.worst_rank, peak / units::kGiB, r.capacity_bytes / units::kGiB, (peak - r.capacity_bytes) / units::kGiB,
                     100 * (peak / std::max(r.capacity_bytes, 1.0) - 1));
}

std::string summary(const results::Result& r) {
  const auto& s = r.scenario_spec;
  std::string out;
  // First, where no one can miss it: every number below assumes memory the GPUs do not have.
  if (!r.fits) out += "*** " + does_not_fit(r) + " ***\n";
  const std::string params = r.params >= 1e9 ? fmt::format("{:.2f} B", r.params / 1e9) : fmt::format("{:.2f} M", r.params / 1e6);
  out += fmt::format("{}: {} ({} parameters) on {} x {} ({} nodes x {}{})\n", r.scenario, s.model.name, params, r.gpus,
                     s.device.name, s.cluster.nodes, s.cluster.gpus_per_node, torus_text(s));
  out += fmt::format("  {}; micro-batch {}, {} micro-batches per step, global batch {}, {}\n", parallel_dimensions(s.parallelism),
                     s.parallelism.micro_batch, r.plan.micro_batches, s.training.global_batch,
                     strategies::precision_text(s.training));
  out += gradient_sync(r);
  out += software(s);
  if (s.parallelism.pipeline > 1)
    out += fmt::format("  {} schedule, {} virtual stages, ranks {}; zero stage {}{}, recompute {}\n",
                       strategies::to_string(s.parallelism.schedule), s.parallelism.virtual_stages,
                       s.parallelism.pipeline_outer ? "tp-dp-pp" : "tp-pp-dp", s.parallelism.zero_stage, zero_detail(s.parallelism),
                       recompute_text(s.parallelism));
  if (r.timed) {
    out += fmt::format("\nstep time      {:10.4f} s   ({} backend, {} tasks, {} flows){}\n", r.step_time_s, r.timeline.backend,
                       r.plan.graph.tasks.size(), r.timeline.flows, r.fits ? "" : "; not achievable: does not fit");
    out += achievable_rates(r);
    const auto& b = r.breakdown;
    // The parts add up to the step time. Asynchronous workers keep their own pace: their time
    // while all of them ran, per step's worth of updates.
    const double whole = r.step_time_s;
    out += r.async ? std::string("\nwhere the step goes (every worker's time, per step's worth of updates)\n")
                   : fmt::format("\nwhere the step goes (GPU {}, the last to finish)\n", b.rank);
    for (auto [name, v] : {std::pair{"compute", b.compute}, {"exposed communication", b.exposed_communication},
                           {"pipeline bubble", b.pipeline_bubble}, {"stage imbalance", b.stage_imbalance},
                           {"optimizer", b.optimizer},
                           {"straggler wait", b.straggler_wait}, {"input stall", b.input_stall},
                           {"checkpoint", b.checkpoint}, {"comm interference", b.comm_interference}}) {
      if (std::string_view(name) == "checkpoint" && !r.roles) continue;
      if (std::string_view(name) == "comm interference" && !r.shows_interference()) continue;
      out += fmt::format("  {:<22} {:9.4f} s {:5.1f}%  {}\n", name, v, 100 * v / whole, bar(v / whole));
    }
  }
  out += memory_lines(r);
  if (r.steps) {
    const auto& st = *r.steps;
    out += fmt::format("\n{} steps{}: mean {:.4f} s, p50 {:.4f} s, p99 {:.4f} s, max {:.4f} s\n", st.step_times.size(),
                       r.async ? " per worker, until the last worker ends each" : "", st.mean, st.p50, st.p99, st.max);
    out += fmt::format("  idle at the gradient sync: {:.4f} s per GPU and step on average, {:.4f} s at most (GPU {})\n",
                       st.mean_wait_s, st.max_wait_s, st.max_wait_gpu);
    if (!st.critical.empty())
      out += fmt::format("  last to the sync most often: GPU {} ({} of {} steps)\n", st.critical.front().first,
                         st.critical.front().second, st.step_times.size());
  }
  if (r.async) {
    const auto& a = *r.async;
    const auto& p = r.scenario_spec.parallelism;
    out += fmt::format("\n{} updates: {} applied in {:.4f} s while all workers ran, {:.1f} samples/s\n",
                       strategies::to_string(p.updates), a.updates, a.window_s, a.samples_per_s);
    out += fmt::format("  staleness (updates by others since the worker's last pull): mean {:.2f}, p50 {:.0f}, p99 {:.0f}, max {:.0f}",
                       a.staleness_mean, a.staleness_p50, a.staleness_p99, a.staleness_max);
    out += p.staleness_bound >= 0 ? fmt::format(" (bound: {} steps ahead)\n", p.staleness_bound) : std::string("\n");
  }
  if (r.faults) {
    const auto& f = *r.faults;
    out += fmt::format("\nfailures: system MTBF {:.2f} h; checkpoint every {:.1f} min (Young {:.1f}, Daly {:.1f})\n",
                       f.system_mtbf_s / 3600, f.interval_s / 60, f.young_interval_s / 60, f.daly_interval_s / 60);
    out += fmt::format("  goodput {:.1f}% (at Daly's interval {:.1f}%)", 100 * f.goodput, 100 * f.goodput_at_daly);
    if (f.ideal_time_s > 0)
      out += fmt::format("; {:.1f} days of training take {:.1f} days with ~{:.0f} failures", f.ideal_time_s / 86400,
                         f.expected_time_s / 86400, f.expected_failures);
    out += "\n";
  }
  out += results::plan_text(r);
  if (r.range) {
    out += '\n';
    out += results::range_text(*r.range);
  }
  for (const auto& w : r.warnings) out += "\nwarning: " + w + "\n";
  return out;
}

std::string kernel_table(const results::Result& r) {
  // The breakdown's GPU, or GPU 0 where it averages several or stands for others' tasks.
  int rank = std::max(r.breakdown.rank, 0);
  auto groups = results::kernel_view(r, rank);
  if (groups.empty()) groups = results::kernel_view(r, rank = 0);
  double total = 0;
  for (const auto& g : groups) total += g.seconds;
  // Overlapped collectives slow some of these kernels in the replay (comm interference), and on a
  // pipeline the stage's passes are only part of the step: the sum is not the step time.
  std::string out = fmt::format("\nkernel time by role (GPU {}, one step, before overlapped collectives take their share)\n", rank);
  for (const auto& g : groups)
    out += fmt::format("  {:<22} {:>9.0f} kernels {:9.4f} s {:5.1f}%  {}\n", g.name, g.kernels, g.seconds,
                       total > 0 ? 100 * g.seconds / total : 0.0, bar(total > 0 ? g.seconds / total : 0.0));
  out += fmt::format("  {:<22} {:>17} {:9.4f} s\n", "total", "", total);
  return out;
}

}  // namespace dtsim::reports
