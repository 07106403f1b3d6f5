#include "sim/network/platform.hpp"

#include <stdexcept>

namespace dtsim::network {

const char* to_string(Fabric f) {
  switch (f) {
    case Fabric::NvSwitch: return "nvswitch";
    case Fabric::NvLinkRing: return "nvlink-ring";
    case Fabric::Pcie: return "pcie";
  }
  return "?";
}

const char* to_string(Topology t) {
  switch (t) {
    case Topology::FatTree: return "fat-tree";
    case Topology::RailOptimized: return "rail-optimized";
    case Topology::SingleSwitch: return "single-switch";
  }
  return "?";
}

Platform::Platform(const ClusterSpec& spec) : spec_(spec) {
  if (spec.fabric != Fabric::NvSwitch) throw std::invalid_argument("only the nvswitch fabric is modelled so far");
  const int gpus = spec.num_gpus();
  endpoint_links_.resize(static_cast<std::size_t>(gpus + spec.nodes * spec.nics_per_node));
  // Each GPU's NVSwitch port; the switch itself does not block. Latency is split over both ends;
  // bandwidth is what collectives reach of the line rate (protocol overhead, measured by nccl-tests).
  for (int g = 0; g < gpus; ++g) {
    links_.push_back({"nvl" + std::to_string(g), spec.intra_bandwidth * spec.intra_efficiency, spec.intra_latency / 2});
    endpoint_links_[static_cast<std::size_t>(g)] = {static_cast<int>(links_.size()) - 1};
  }
  // An oversubscribed fabric is modelled as one uplink per node carrying all its NICs' traffic at
  // nics x bandwidth / oversubscription: a leaf switch with fewer uplinks than downlinks.
  const bool oversubscribed = spec.topology == Topology::FatTree && spec.oversubscription > 1.0;
  for (int n = 0; n < spec.nodes; ++n) {
    int uplink = -1;
    if (oversubscribed) {
      links_.push_back({"up" + std::to_string(n),
                        spec.nics_per_node * spec.nic_bandwidth * spec.inter_efficiency / spec.oversubscription, 0});
      uplink = static_cast<int>(links_.size()) - 1;
    }
    for (int j = 0; j < spec.nics_per_node; ++j) {
      links_.push_back({"nic" + std::to_string(n) + "." + std::to_string(j), spec.nic_bandwidth * spec.inter_efficiency,
                        spec.inter_latency / 2});
      auto& l = endpoint_links_[static_cast<std::size_t>(gpus + n * spec.nics_per_node + j)];
      l = {static_cast<int>(links_.size()) - 1};
      if (uplink >= 0) l.push_back(uplink);
    }
  }
  auto link = [&](std::string name, double bw, double lat) {
    links_.push_back({std::move(name), bw, lat});
    return static_cast<int>(links_.size()) - 1;
  };
  ps_base_ = num_endpoints();
  for (int k = 0; k < spec.ps_servers; ++k)
    add_endpoint({link("ps" + std::to_string(k), spec.ps_nic_bandwidth * spec.inter_efficiency, spec.inter_latency / 2)});
  // Host memory is a link too: a host's CPU sums what its GPUs send at memory bandwidth.
  pcie_base_ = num_endpoints();
  for (int g = 0; g < gpus; ++g) add_endpoint({link("pcie" + std::to_string(g), spec.pcie_bandwidth, 1e-6)});
  host_base_ = num_endpoints();
  for (int n = 0; n < spec.nodes; ++n) add_endpoint({link("host" + std::to_string(n), spec.host_memory_bandwidth, 1e-6)});
}

int Platform::add_endpoint(std::vector<int> links) {
  endpoint_links_.push_back(std::move(links));
  return num_endpoints() - 1;
}

int Platform::nic_endpoint(int gpu) const {
  int nic = local_of(gpu) * spec_.nics_per_node / spec_.gpus_per_node;
  return spec_.num_gpus() + node_of(gpu) * spec_.nics_per_node + nic;
}

std::string Platform::endpoint_name(int endpoint) const {
  if (endpoint < spec_.num_gpus()) return "gpu" + std::to_string(endpoint);
  if (endpoint >= host_base_) return "host" + std::to_string(endpoint - host_base_);
  if (endpoint >= pcie_base_) return "pcie" + std::to_string(endpoint - pcie_base_);
  if (endpoint >= ps_base_) return "ps" + std::to_string(endpoint - ps_base_);
  int k = endpoint - spec_.num_gpus();
  return "nic" + std::to_string(k / spec_.nics_per_node) + "." + std::to_string(k % spec_.nics_per_node);
}

double Platform::route_latency(int src, int dst) const {
  double l = 0;
  for (int i : endpoint_links(src)) l += links_[static_cast<std::size_t>(i)].latency;
  for (int i : endpoint_links(dst)) l += links_[static_cast<std::size_t>(i)].latency;
  return l;
}

}  // namespace dtsim::network
