#include <fmt/format.h>

#include <algorithm>
#include <iostream>

#include "sim/cli/commands.hpp"
#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "sim/core/files.hpp"
#include "sim/profile/cpu_profiler.hpp"
#include "sim/profile/gpu_profiler.hpp"
#include "strategies/memory.hpp"

namespace dtsim::cli {

namespace {

// Operands a kernel may need to be timed: 4 GB on the CPU (host memory shared with everything
// else); 20 GB on a GPU, whose memory holds nothing else while it profiles (an H100 has 80).
constexpr double kMaxOperandBytesCpu = 4e9;
constexpr double kMaxOperandBytesGpu = 20e9;

// What timing a kernel allocates: a memory kernel's bytes (on a GPU at most the largest stream it
// times, the time scaled); otherwise (GEMMs, attention) the operands of a GEMM of its shape in
// `element` bytes, as the profilers time them: the CPU up to 4 of a batch (the time scaled),
// cuBLAS the whole batch at once.
double operand_bytes(const models::Kernel& k, double element, bool gpu) {
  const bool whole_batch = gpu;
  if (k.kind == models::KernelKind::Memory) return gpu ? std::min(k.bytes, profile::kGpuMaxStreamBytes) : k.bytes;
  const double m = static_cast<double>(k.m), n = static_cast<double>(k.n), kk = static_cast<double>(k.k);
  const double batch = whole_batch ? static_cast<double>(k.batch) : std::min<double>(static_cast<double>(k.batch), 4);
  if (whole_batch) return element * batch * (m * kk + kk * n + m * n);
  return element * (batch * m * kk + kk * n + m * n);
}

}  // namespace

int profile(const ProfileOptions& o) {
  const bool gpu = o.device == "cuda";
  std::string why;
  if (gpu && !profile::gpu_available(why)) throw InputError("", "--device", why);
  if (!gpu) {
    try {
      profile::cpu_provenance();  // finds the kernel plugin and checks its ISA against this CPU
    } catch (const std::runtime_error& e) {
      throw InputError("", "--device", e.what());
    }
  }
  const std::string dtype = o.dtype.empty() ? (gpu ? "bf16" : "fp32") : o.dtype;
  if (!gpu && dtype != "fp32") throw InputError("", "--dtype", "the CPU profile times fp32 (Eigen)");
  if (!o.model.empty() && !o.scenario.empty()) throw InputError("", "--model", "give --model or --scenario, not both");
  check_output_path(o.out);  // before minutes of timing, not after
  const bool half = dtype == "bf16" || dtype == "fp16";
  models::ModelSpec spec;
  models::BuildOptions opts;
  opts.activation_bytes = half ? 2 : 4;
  if (!o.scenario.empty()) {
    const auto s = config::load_scenario(o.scenario);
    spec = s.model;
    opts.micro_batch = s.parallelism.micro_batch;
    opts.attention = s.training.attention;
    opts.tensor = s.parallelism.tensor;
    opts.sequence_parallel = s.parallelism.sequence_parallel;
  } else {
    spec = config::load_model_preset(o.model.empty() ? "tiny-gpt" : o.model);
  }
  if (o.micro_batch > 0) opts.micro_batch = o.micro_batch;
  const auto g = spec.build(opts);
  std::vector<models::Kernel> kernels;
  for (const auto& l : g.layers) {
    for (const auto& op : l.ops) {
      kernels.insert(kernels.end(), op.forward.begin(), op.forward.end());
      kernels.insert(kernels.end(), op.backward.begin(), op.backward.end());
    }
    if (l.params() > 0) kernels.push_back(models::grad_accumulate_kernel(l.params(), opts.activation_bytes));
  }
  const auto path = dtype == "fp16" ? models::UpdatePath::Fp16Master
                    : dtype == "bf16" ? models::UpdatePath::Bf16Master
                                      : models::UpdatePath::Fp32;
  kernels.push_back(models::optimizer_kernel(models::OptimizerKind::Adam, g.params(), path));
  // Every kernel is run for real: refuse operands that would not fit in memory before allocating.
  const double element = half ? 2.0 : 4.0, limit = gpu ? kMaxOperandBytesGpu : kMaxOperandBytesCpu;
  const auto bytes = [&](const models::Kernel& k) { return operand_bytes(k, element, gpu); };
  const auto worst = std::max_element(kernels.begin(), kernels.end(),
                                      [&](const auto& a, const auto& b) { return bytes(a) < bytes(b); });
  if (worst != kernels.end() && bytes(*worst) > limit)
    throw InputError(o.scenario.empty() ? "" : o.scenario,
                     o.micro_batch > 0 ? "--micro-batch" : o.scenario.empty() ? "--model" : "/parallelism/micro_batch_size",
                     fmt::format("kernel {} needs {:.1f} GB of operands to time, over the limit of {:.0f} GB; a smaller "
                                 "micro-batch or model fits",
                                 worst->name, bytes(*worst) / 1e9, limit / 1e9));
  profile::Options po;
  po.repeats = o.repeats;
  std::cerr << fmt::format("profiling {} ({} kernels) on the {}...\n", spec.name, kernels.size(), gpu ? "GPU" : "CPU");
  auto table = gpu ? profile::profile_gpu(kernels, dtype, po) : profile::profile_cpu(kernels, po);
  table.provenance["model"] = spec.name;
  table.provenance["micro_batch"] = opts.micro_batch;
  write_file_atomic(o.out, table.to_json().dump(2) + "\n");
  std::size_t elementwise = 0;
  for (const auto& [kind, entries] : table.elementwise) elementwise += entries.size();
  std::cout << fmt::format(
      "wrote {}: {} GEMM shapes, {} convolutions, {} memory sizes, {} element-wise sizes, launch overhead {:.2f} us\n",
      o.out, table.gemms.size(), table.convs.size(), table.memory.size(), elementwise, table.launch_overhead_s * 1e6);
  if (!gpu)
    std::cout << fmt::format("kernels compiled for {} ({}), {} threads\n", table.provenance.value("isa", "?"),
                             table.provenance.value("simd", "?"), table.provenance.value("threads", 0));
  if (table.noisy) {
    std::cerr << "warning: the timings are noisy (the table is marked \"noisy\"):\n";
    for (const auto& r : table.provenance["timing"]["noisy_reasons"]) std::cerr << "  " << r.get<std::string>() << "\n";
    std::cerr << "  profile again on a quiet machine before trusting predictions made with it\n";
  }
  return 0;
}

}  // namespace dtsim::cli
