// The PCIe copies of offload (activation offload's are strategies/units/activation_offload.cpp)
// and the optimizer on the host (ZeRO-Offload).
#include <algorithm>
#include <utility>

#include "strategies/planner.hpp"

namespace dtsim::strategies {

// A PCIe transfer on one of the GPU's copy engines, after the last copy that way of the same
// GPUs: the replica being emitted, at pipeline stage s (neither another replica's copies nor
// another stage's queue before it: those GPUs have their own engines). What GPUs do share, a
// PCIe switch's uplink and the host's memory, the replay's host links share, not the stream.
// Every GPU the representative stands for copies the same at the same time: the replay prices
// them together on the host links.
int Planner::pcie_copy(int s, double bytes, std::vector<int> deps, bool to_host, const std::string& label) {
  int& stream = copy_streams_.try_emplace({d_, s}, std::array<int, 2>{-1, -1}).first->second[to_host ? 1 : 0];
  if (stream >= 0) deps.push_back(stream);
  auto gpus_of = [&](int from, int to) {
    std::vector<int> gpus;
    for (int d = from; d < to; ++d)
      for (int t = 0; t < p_.tensor; ++t)
        for (int c = 0; c < p_.context; ++c) gpus.push_back(place_.gpu(d, s, t, c));
    return plan_.graph.add_group(std::move(gpus));
  };
  const bool own_tasks = plan_.replicas > 1;  // each replica has its own tasks: its GPUs alone
  auto [group, fresh] = copy_groups_.try_emplace({d_, s}, -1);
  if (fresh) group->second = own_tasks ? gpus_of(d_, d_ + 1) : gpus_of(0, p_.data);
  taskgraph::Work w;
  w.name = "pcie copy";
  w.copy_bytes = bytes;
  w.copy_to_host = to_host;
  w.copy_group = group->second;
  if (own_tasks) {  // the other replicas copy the same at the same moment (analytical price)
    auto [together, made] = copy_together_groups_.try_emplace(s, -1);
    if (made) together->second = gpus_of(0, p_.data);
    w.copy_together_group = together->second;
  }
  stream = plan_.graph.add_compute(rep(s), table_.get(std::move(w)), Category::Copy, label, std::move(deps));
  if (d_ == 0 && s == 0) plan_.pcie_bytes_per_step += bytes;
  return stream;
}

// ZeRO-Offload (Ren et al. 2021, Sec. 4): 16-bit gradients go down to the host as backward
// produces them (DeepSpeed copies each reduced bucket), the CPU optimizer runs on the host's
// cores at its memory bandwidth, and the 16-bit parameters come back up.
void Planner::step_optimizer_on_host(int s, int embedding_sync) {
  const Layers mine = stage_layers(s);
  const double shards = p_.zero_stage >= 1 ? grad_ranks() : 1;
  const double shard = layer_params(mine) / shards;
  const double gbytes = grad_bytes_per_param(t_.precision);
  std::vector<int> downs;
  // Gradient buckets as DeepSpeed's reduce buckets fill; with data parallelism each waits for the
  // reductions, alone each follows the backward of its last layer.
  const double cap = p_.framework.reduce_bucket_params * gbytes;
  const auto buckets = make_buckets(mine, gbytes, cap, cap);
  const auto& finals = replica_final_[static_cast<std::size_t>(d_)];
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    std::vector<int> deps;
    if (grad_ranks() > 1 && last_comm_[static_cast<std::size_t>(s)] >= 0) deps.push_back(last_comm_[static_cast<std::size_t>(s)]);
    const auto it = finals.find(mine[static_cast<std::size_t>(buckets[b].ready_after_layer)]);
    deps.push_back(it != finals.end() ? it->second : last_compute_[static_cast<std::size_t>(s)]);
    downs.push_back(pcie_copy(s, buckets[b].bytes / shards, deps, true, "gradients to host " + std::to_string(b)));
  }
  taskgraph::Work w;
  w.name = "host optimizer";
  // Per parameter: read the fp32 weight, gradient and optimizer state, write weight and state
  // back and the 16-bit copy for the GPU (DeepSpeed csrc/adam/cpu_adam_impl.cpp, Step_AVX).
  const double opt = optimizer_bytes_per_param(t_.precision, t_.optimizer);
  const double traffic = 2.0 * opt + 4.0 + weight_bytes_per_param(t_.precision);
  const double flops = t_.optimizer == models::OptimizerKind::Adam ? 12.0 : 4.0;  // Adam's update, per element
  w.fixed_seconds = std::max(shard * traffic / host_.memory_bandwidth_per_gpu, shard * flops / (host_.cores_per_gpu * host_.core_flops));
  std::vector<int> deps = downs;
  if (embedding_sync >= 0) deps.push_back(embedding_sync);
  if (last_compute_[static_cast<std::size_t>(s)] >= 0) deps.push_back(last_compute_[static_cast<std::size_t>(s)]);
  unit_step_waits(deps);
  const int step = plan_.graph.add_compute(rep(s), table_.get(std::move(w)), Category::Optimizer, "host optimizer", deps);
  replica_last_[static_cast<std::size_t>(d_)][static_cast<std::size_t>(s)] =
      pcie_copy(s, shard * weight_bytes_per_param(t_.precision), {step}, false, "parameters to GPU");
}

}  // namespace dtsim::strategies
