#include <fmt/format.h>

#include <iostream>

#include "sim/cli/commands.hpp"
#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "sim/core/files.hpp"
#include "sim/profile/cpu_profiler.hpp"
#include "strategies/memory.hpp"

namespace dtsim::cli {

int profile(const ProfileOptions& o) {
  if (o.device != "cpu")
    throw InputError("", "--device", "this dtsim was built without CUDA; only --device cpu can be profiled");
  if (!o.model.empty() && !o.scenario.empty()) throw InputError("", "--model", "give --model or --scenario, not both");
  models::TransformerSpec spec;
  models::BuildOptions opts;
  opts.activation_bytes = 4;  // Eigen times fp32
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
  const auto g = models::build_transformer(spec, opts);
  std::vector<models::Kernel> kernels;
  for (const auto& l : g.layers) {
    for (const auto& op : l.ops) {
      kernels.insert(kernels.end(), op.forward.begin(), op.forward.end());
      kernels.insert(kernels.end(), op.backward.begin(), op.backward.end());
    }
    if (l.params() > 0) kernels.push_back(models::grad_accumulate_kernel(l.params(), opts.activation_bytes));
  }
  kernels.push_back(models::optimizer_kernel(models::OptimizerKind::Adam, g.params(), false));
  profile::Options po;
  po.repeats = o.repeats;
  std::cerr << fmt::format("profiling {} ({} kernels) on the CPU...\n", spec.name, kernels.size());
  auto table = profile::profile_cpu(kernels, po);
  table.provenance["model"] = spec.name;
  table.provenance["micro_batch"] = opts.micro_batch;
  write_file_atomic(o.out, table.to_json().dump(2) + "\n");
  std::cout << fmt::format("wrote {}: {} GEMM shapes, {} memory sizes\n", o.out, table.gemms.size(), table.memory.size());
  return 0;
}

}  // namespace dtsim::cli
