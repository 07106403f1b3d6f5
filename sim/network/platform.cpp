#include "sim/network/platform.hpp"

#include <algorithm>
#include <stdexcept>

#include "sim/core/interpolate.hpp"

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
    case Topology::Torus2D: return "torus-2d";
    case Topology::Torus3D: return "torus-3d";
  }
  return "?";
}

std::string LinkName::str() const {
  static constexpr const char* kPrefix[] = {"ici", "nvl", "ring", "bridge", "pcie", "rail", "up", "nic", "ps", "pcisw", "host", "nvs"};
  std::string s = kPrefix[static_cast<int>(kind)] + std::to_string(a);
  if (b >= 0) s += "." + std::to_string(b);
  return s;
}

namespace {

// Links inside a node (or a torus): the GPUs' own ports. PCIe nodes: each GPU's link, which
// carries peer and host traffic alike, returned.
std::vector<int> add_intra_links(const ClusterSpec& spec, double intra, std::vector<Link>& links,
                                 std::vector<EndpointLinks>& endpoints, int& torus_base, int& ring_base) {
  const int gpus = spec.num_gpus(), per_node = spec.gpus_per_node;
  std::vector<int> own_pcie;
  if (!spec.torus_dims.empty()) {
    // One link per chip and dimension to its +1 neighbour; the last chip's wraps around to the
    // first. Chips of one node are neighbours on the torus like any others.
    torus_base = static_cast<int>(links.size());
    const double bw = spec.torus_link_bandwidth * (1 - spec.background_intra);
    for (int g = 0; g < gpus; ++g)
      for (std::size_t k = 0; k < spec.torus_dims.size(); ++k)
        links.push_back({{LinkKind::Ici, g, static_cast<int>(k)}, bw, spec.torus_link_latency});
  } else if (spec.fabric == Fabric::NvSwitch) {
    // Each GPU's NVSwitch port; the switch itself does not block. Latency is split over both ends.
    for (int g = 0; g < gpus; ++g) {
      links.push_back({{LinkKind::Nvl, g}, intra, spec.intra_latency / 2});
      endpoints[static_cast<std::size_t>(g)] = {static_cast<int>(links.size()) - 1};
    }
  } else if (spec.fabric == Fabric::NvLinkRing) {
    // One NVLink between neighbours; a transfer to a farther GPU crosses every link on the way.
    ring_base = static_cast<int>(links.size());
    for (int n = 0; n < spec.nodes; ++n)
      for (int i = 0; i < per_node; ++i)
        links.push_back({{LinkKind::Ring, n, i}, intra, spec.intra_latency});
  } else {
    // Peer traffic leaves through the GPU's PCIe link and crosses the node's host bridge.
    const int bridge0 = static_cast<int>(links.size());
    const double bridge = spec.host_bridge_bandwidth > 0 ? spec.host_bridge_bandwidth : spec.intra_bandwidth;
    for (int n = 0; n < spec.nodes; ++n)
      links.push_back({{LinkKind::Bridge, n}, bridge * spec.intra_efficiency * (1 - spec.background_intra), 0});
    for (int g = 0; g < gpus; ++g) {
      links.push_back({{LinkKind::Pcie, g}, intra, spec.intra_latency / 2});
      own_pcie.push_back(static_cast<int>(links.size()) - 1);
      endpoints[static_cast<std::size_t>(g)] = {own_pcie.back(), bridge0 + g / per_node};
    }
  }
  return own_pcie;
}

// The NICs, each node's uplink where the fat tree is oversubscribed, and rail switches' uplinks.
void add_nic_links(const ClusterSpec& spec, std::vector<Link>& links, std::vector<EndpointLinks>& endpoints, int& rail_base) {
  const int gpus = spec.num_gpus();
  // An oversubscribed fabric is modelled as one uplink per node carrying all its NICs' traffic at
  // nics x bandwidth / oversubscription: a leaf switch with fewer uplinks than downlinks.
  const bool oversubscribed = spec.topology == Topology::FatTree && spec.oversubscription > 1.0;
  if (spec.topology == Topology::RailOptimized) {
    // NIC j of every node hangs off rail switch j; between rails traffic climbs to the spine
    // through the rail's uplinks, all of a rail's NICs' worth over the oversubscription.
    rail_base = static_cast<int>(links.size());
    for (int j = 0; j < spec.nics_per_node; ++j)
      links.push_back({{LinkKind::Rail, j},
                        spec.nodes * spec.nic_bandwidth * spec.inter_efficiency / spec.oversubscription *
                            (1 - spec.background_uplink),
                        0});
  }
  for (int n = 0; n < spec.nodes; ++n) {
    int uplink = -1;
    if (oversubscribed) {
      links.push_back({{LinkKind::Up, n},
                        spec.nics_per_node * spec.nic_bandwidth * spec.inter_efficiency / spec.oversubscription *
                            (1 - spec.background_uplink),
                        0});
      uplink = static_cast<int>(links.size()) - 1;
    }
    for (int j = 0; j < spec.nics_per_node; ++j) {
      links.push_back({{LinkKind::Nic, n, j},
                        spec.nic_bandwidth * spec.inter_efficiency * (1 - spec.background_nic),
                        spec.inter_latency / 2});
      auto& l = endpoints[static_cast<std::size_t>(gpus + n * spec.nics_per_node + j)];
      l = {static_cast<int>(links.size()) - 1};
      if (uplink >= 0) l.push_back(uplink);
    }
  }
}

}  // namespace

Platform::Platform(const ClusterSpec& spec) : spec_(spec) {
  for (int d : spec.torus_dims) pod_chips_ *= d;
  const int gpus = spec.num_gpus(), per_node = spec.gpus_per_node;
  endpoint_links_.resize(static_cast<std::size_t>(gpus + spec.nodes * spec.nics_per_node));
  // Bandwidth is what collectives reach of the line rate (protocol overhead, measured by nccl-tests).
  const double intra = spec.intra_bandwidth * spec.intra_efficiency * (1 - spec.background_intra);
  // PCIe nodes: the GPU's one link carries peer and host traffic alike.
  const std::vector<int> own_pcie = add_intra_links(spec, intra, links_, endpoint_links_, torus_base_, ring_base_);
  add_nic_links(spec, links_, endpoint_links_, rail_base_);
  auto link = [&](LinkName name, double bw, double lat) {
    links_.push_back({name, bw, lat});
    return static_cast<int>(links_.size()) - 1;
  };
  ps_base_ = num_endpoints();
  for (int k = 0; k < spec.ps_servers; ++k)
    add_endpoint({link({LinkKind::Ps, k}, spec.ps_nic_bandwidth * spec.inter_efficiency, spec.inter_latency / 2)});
  // A GPU's way to its host's memory: its own PCIe link, then (GPUs sharing a PCIe switch) the
  // switch's uplink to the CPU. PCIe nodes' GPUs already hang off their own link and the bridge.
  const int per_switch = std::max(1, spec.gpus_per_pcie_switch);
  if (own_pcie.empty() && per_switch > 1) {
    switch_base_ = static_cast<int>(links_.size());
    const double up = spec.pcie_switch_bandwidth > 0 ? spec.pcie_switch_bandwidth : spec.pcie_bandwidth;
    for (int n = 0; n < spec.nodes; ++n)
      for (int k = 0; k < (per_node + per_switch - 1) / per_switch; ++k)
        link({LinkKind::PcieSwitch, n, k}, up, 0);
  }
  // Host memory is a link too: a host's CPU sums what its GPUs send at memory bandwidth.
  pcie_base_ = num_endpoints();
  for (int g = 0; g < gpus; ++g) {
    if (!own_pcie.empty()) {
      add_endpoint({own_pcie[static_cast<std::size_t>(g)]});
      continue;
    }
    EndpointLinks path{link({LinkKind::Pcie, g}, spec.pcie_bandwidth, spec.pcie_latency)};
    if (switch_base_ >= 0) path.push_back(pcie_switch_link(g));
    add_endpoint(path);
  }
  host_base_ = num_endpoints();
  for (int n = 0; n < spec.nodes; ++n) add_endpoint({link({LinkKind::Host, n}, spec.host_memory_bandwidth, spec.pcie_latency)});
  // Last, so that no other endpoint's number moves: each NVLink SHARP node's switch, behind a
  // link as wide as all its GPUs' ports together.
  if (spec.intra_nvls && spec.fabric == Fabric::NvSwitch && spec.torus_dims.empty()) {
    nvs_base_ = num_endpoints();
    for (int n = 0; n < spec.nodes; ++n) add_endpoint({link({LinkKind::Nvs, n}, intra * per_node, 0)});
  }
  link_users_.assign(links_.size(), 0);
  for (const auto& e : endpoint_links_)
    for (int k = 0; k < e.count; ++k) {
      auto& users = link_users_[static_cast<std::size_t>(e.ids[static_cast<std::size_t>(k)])];
      users = static_cast<std::uint8_t>(std::min(2, users + 1));
    }
}

EndpointLinks::EndpointLinks(std::initializer_list<int> links) {
  for (int l : links) push_back(l);
}

void EndpointLinks::push_back(int link) {
  if (count >= static_cast<int>(ids.size())) throw std::logic_error("an endpoint has at most two links to the centre");
  ids[static_cast<std::size_t>(count++)] = link;
}

int Platform::add_endpoint(EndpointLinks links) {
  endpoint_links_.push_back(links);
  return num_endpoints() - 1;
}

int Platform::pcie_switch_link(int gpu) const {
  if (switch_base_ < 0) return -1;
  const int per_switch = spec_.gpus_per_pcie_switch, per_node = spec_.gpus_per_node;
  return switch_base_ + node_of(gpu) * ((per_node + per_switch - 1) / per_switch) + local_of(gpu) / per_switch;
}

int Platform::nic_endpoint(int gpu) const {
  int nic = local_of(gpu) * spec_.nics_per_node / spec_.gpus_per_node;
  return spec_.num_gpus() + node_of(gpu) * spec_.nics_per_node + nic;
}

std::string Platform::endpoint_name(int endpoint) const {
  if (endpoint < spec_.num_gpus()) return "gpu" + std::to_string(endpoint);
  if (nvs_base_ >= 0 && endpoint >= nvs_base_) return "nvs" + std::to_string(endpoint - nvs_base_);
  if (endpoint >= host_base_) return "host" + std::to_string(endpoint - host_base_);
  if (endpoint >= pcie_base_) return "pcie" + std::to_string(endpoint - pcie_base_);
  if (endpoint >= ps_base_) return "ps" + std::to_string(endpoint - ps_base_);
  int k = endpoint - spec_.num_gpus();
  return "nic" + std::to_string(k / spec_.nics_per_node) + "." + std::to_string(k % spec_.nics_per_node);
}

bool Platform::can_shift(int locals) const {
  if (torus()) return false;
  if (locals == 0) return true;
  const int per_node = spec_.gpus_per_node;
  return spec_.fabric == Fabric::NvSwitch && (locals * spec_.nics_per_node) % per_node == 0;
}

int Platform::shift_endpoint(int e, int nodes, int locals) const {
  const int gpus = spec_.num_gpus(), per_node = spec_.gpus_per_node, nics = spec_.nics_per_node;
  auto gpu = [&](int g) { return g + nodes * per_node + locals; };
  if (e < gpus) return gpu(e);
  if (e < ps_base_) {
    const int k = e - gpus;
    return gpus + (k / nics + nodes) * nics + k % nics + locals * nics / per_node;
  }
  if (e < pcie_base_) return e;  // a parameter server
  if (e < host_base_) return pcie_base_ + gpu(e - pcie_base_);
  return e + nodes;  // a node's host memory or its NVSwitch
}

int Platform::ring_link(int node, int local) const {
  return ring_base_ < 0 ? -1 : ring_base_ + node * spec_.gpus_per_node + local;
}

int Platform::torus_coord(int chip, int dim) const {
  int stride = 1;
  for (int k = 0; k < dim; ++k) stride *= spec_.torus_dims[static_cast<std::size_t>(k)];
  return chip / stride % spec_.torus_dims[static_cast<std::size_t>(dim)];
}

int Platform::torus_neighbour(int chip, int dim, int steps) const {
  int stride = 1;
  for (int k = 0; k < dim; ++k) stride *= spec_.torus_dims[static_cast<std::size_t>(k)];
  const int d = spec_.torus_dims[static_cast<std::size_t>(dim)], c = torus_coord(chip, dim);
  return chip + (((c + steps) % d + d) % d - c) * stride;
}

int Platform::pod_of(int chip) const { return torus() ? chip / pod_chips_ : 0; }

int Platform::torus_link(int chip, int dim) const {
  if (torus_base_ < 0 || spec_.torus_dims[static_cast<std::size_t>(dim)] < 2) return -1;
  return torus_base_ + chip * static_cast<int>(spec_.torus_dims.size()) + dim;
}

int Platform::rail_of(int endpoint) const {
  const int gpus = spec_.num_gpus();
  if (rail_base_ < 0 || endpoint < gpus || endpoint >= gpus + spec_.nodes * spec_.nics_per_node) return -1;
  return (endpoint - gpus) % spec_.nics_per_node;
}

int Platform::rail_uplink(int rail) const { return rail_base_ < 0 ? -1 : rail_base_ + rail; }

std::vector<Hop> Platform::route(int src, int dst) const {
  std::vector<Hop> r;
  append_route(src, dst, r);
  return r;
}

void Platform::append_route(int src, int dst, std::vector<Hop>& r) const {
  const int gpus = spec_.num_gpus();
  if (torus_base_ >= 0 && src < gpus && dst < gpus && pod_of(src) != pod_of(dst)) {
    // Between pods: the hosts' NICs, over the data-centre network.
    for (int l : endpoint_links(nic_endpoint(src))) r.push_back({l, true});
    for (int l : endpoint_links(nic_endpoint(dst))) r.push_back({l, false});
    return;
  }
  if (torus_base_ >= 0 && src < gpus && dst < gpus) {
    // Dimension-order routing, the shorter way around each dimension (ties go up).
    int at = src;
    for (int k = 0; k < static_cast<int>(spec_.torus_dims.size()); ++k) {
      const int d = spec_.torus_dims[static_cast<std::size_t>(k)];
      const int up = ((torus_coord(dst, k) - torus_coord(at, k)) % d + d) % d;
      if (up <= d - up)
        for (int s = 0; s < up; ++s, at = torus_neighbour(at, k, 1)) r.push_back({torus_link(at, k), true});
      else
        for (int s = 0; s < d - up; ++s) {
          at = torus_neighbour(at, k, -1);
          r.push_back({torus_link(at, k), false});
        }
    }
    return;
  }
  if (ring_base_ >= 0 && src < gpus && dst < gpus) {
    if (node_of(src) != node_of(dst)) throw std::logic_error("GPUs of different nodes talk through their NICs");
    // The shorter way around the ring (ties go up).
    const int g = spec_.gpus_per_node, a = local_of(src), n = node_of(src);
    const int up = (local_of(dst) - a + g) % g;
    if (up <= g - up)
      for (int k = 0; k < up; ++k) r.push_back({ring_link(n, (a + k) % g), true});
    else
      for (int k = 0; k < g - up; ++k) r.push_back({ring_link(n, (a - k - 1 + g) % g), false});
    return;
  }
  for (int l : endpoint_links(src)) r.push_back({l, true});
  const int ra = rail_of(src), rb = rail_of(dst);
  if (rail_base_ >= 0 && ra != rb) {
    if (ra >= 0) r.push_back({rail_uplink(ra), true});
    if (rb >= 0) r.push_back({rail_uplink(rb), false});
  }
  for (int l : endpoint_links(dst)) r.push_back({l, false});
}

double Platform::route_latency(int src, int dst) const {
  thread_local std::vector<Hop> hops;  // no allocation per call: lowering asks this for every hop
  hops.clear();
  append_route(src, dst, hops);
  double l = 0;
  for (const auto& h : hops) l += links_[static_cast<std::size_t>(h.link)].latency;
  return l;
}

double Platform::inter_inflation(double bytes) const {
  const auto& pts = spec_.inter_efficiency_points;
  if (pts.empty() || bytes >= pts.back().first) return 1.0;
  if (bytes <= pts.front().first) return std::max(1.0, spec_.inter_efficiency / pts.front().second);
  return std::max(1.0, spec_.inter_efficiency / log_interpolate(pts, bytes));
}

double Platform::intra_all_reduce_inflation(double bytes) const {
  const auto& pts = spec_.intra_efficiency_points;
  if (pts.empty() || bytes < pts.front().first) return 1.0;
  return std::max(1.0, spec_.intra_efficiency / log_interpolate(pts, bytes));
}

}  // namespace dtsim::network
