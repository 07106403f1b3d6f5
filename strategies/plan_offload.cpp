// The PCIe copies of offload, on each GPU's copy engines: activation offload's
// (strategies/units/activation_offload.cpp) and ZeRO-Offload's (strategies/units/optimizer_offload.cpp).
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

}  // namespace dtsim::strategies
