#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sim/network/nccl_tuning.hpp"

// The cluster as endpoints and links, independent of any simulator. Mostly a star: every endpoint
// reaches a central non-blocking point through its own list of links, each link full duplex with
// the same bandwidth per direction, and a route from A to B is A's links up then B's links down.
// Two exceptions: GPUs of an NVLink-ring node reach each other around their ring, and with a
// rail-optimised fabric NICs on different rails also cross their rails' spine uplinks. And on a
// torus (TPU pods) every chip has its own links to its neighbours in each dimension, wrapping
// around, and chips reach each other over them, dimension by dimension.
namespace dtsim::network {

enum class Fabric { NvSwitch, NvLinkRing, Pcie };
enum class Topology { FatTree, RailOptimized, SingleSwitch, Torus2D, Torus3D };

struct ClusterSpec {
  std::string name;
  int nodes = 1, gpus_per_node = 1;
  Fabric fabric = Fabric::NvSwitch;
  double intra_bandwidth = 0, intra_latency = 0;  // per GPU, per direction; end to end
  double intra_efficiency = 1.0;                  // fraction of line rate collectives reach
  // Measured all-reduce efficiency inside one node by buffer size (bytes, fraction of line rate),
  // increasing sizes: NCCL reaches `intra_efficiency` only for large buffers. Empty: always.
  std::vector<std::pair<double, double>> intra_efficiency_points;
  // NVSwitch nodes whose switches reduce (NVLink SHARP). With `nccl_gpu` set, NCCL's model
  // decides when a collective runs as NVLS inside a node (or as an NVLS tree across nodes).
  bool intra_nvls = false;
  // PCIe nodes: what GPU-to-GPU traffic shares on its way through the host (root complex).
  double host_bridge_bandwidth = 0;
  int nics_per_node = 1;
  double nic_bandwidth = 0, inter_latency = 0;  // per NIC, per direction; end to end
  double inter_efficiency = 1.0;
  // The same across nodes: NCCL's efficiency by buffer size for collectives whose group spans
  // nodes (all-reduce, all-gather, reduce-scatter). Empty: `inter_efficiency` at every size.
  std::vector<std::pair<double, double>> inter_efficiency_points;
  // Without those points, the GPU generation and host CPU that NCCL's tuning model
  // (nccl_tuning.hpp) reads, so that a collective across nodes takes at least the time NCCL
  // predicts for it; `None`: line rate.
  nccl::Gpu nccl_gpu = nccl::Gpu::None;
  nccl::Cpu nccl_cpu = nccl::Cpu::Intel;
  Topology topology = Topology::FatTree;
  double oversubscription = 1.0;
  // Torus: chips per dimension (the first varies fastest: chip = x + X*y + X*Y*z), and each
  // chip-to-neighbour link's bandwidth per direction and latency. Chips of a node are on the
  // torus too; the NICs are the hosts' data-centre network, which the torus does not use.
  std::vector<int> torus_dims;
  double torus_link_bandwidth = 0, torus_link_latency = 0;
  // Tori of `torus_dims` each (TPU pods), chips numbered pod by pod; chips of different pods talk
  // through their hosts' NICs (the data-centre network).
  int torus_pods = 1;
  // Dedicated parameter-server hosts, each behind one NIC on the same fabric.
  int ps_servers = 0;
  double ps_nic_bandwidth = 0;
  // Each node's host: GPUs reach its memory over their own PCIe link (central storage, offload
  // copies); `gpus_per_pcie_switch` GPUs share one PCIe switch whose uplink to the CPU carries
  // `pcie_switch_bandwidth` (0: one GPU link's worth). Each link costs `pcie_latency`.
  double pcie_bandwidth = 16e9;
  int gpus_per_pcie_switch = 1;
  double pcie_switch_bandwidth = 0;
  double pcie_latency = 1e-6;
  double host_memory_bandwidth = 200e9;
  // Other jobs' traffic: the share of bandwidth it takes on the node fabric, the NICs and the
  // uplinks above them (fat-tree leaves, rail spines).
  double background_intra = 0, background_nic = 0, background_uplink = 0;
  int num_gpus() const { return nodes * gpus_per_node; }
};

const char* to_string(Fabric f);
const char* to_string(Topology t);

// A link's name, kept as its kind and numbers and written out only where a name is needed (the
// SimGrid platform): a 16,384-GPU platform has 50,000 links, built for every cluster a sweep prices.
enum class LinkKind : std::uint8_t { Ici, Nvl, Ring, Bridge, Pcie, Rail, Up, Nic, Ps, PcieSwitch, Host, Nvs };
struct LinkName {
  LinkKind kind = LinkKind::Nvl;
  int a = 0, b = -1;  // b: a second number ("nic3.1"), -1: none
  std::string str() const;
};

struct Link {
  LinkName name;
  double bandwidth = 0;  // bytes/s per direction
  double latency = 0;    // seconds
};

// The links between an endpoint and the centre: at most two (a GPU's PCIe link and its node's
// bridge, a NIC and its node's uplink), kept in place: a 16,384-GPU platform has 50,000 endpoints.
struct EndpointLinks {
  std::array<int, 2> ids{};
  int count = 0;
  EndpointLinks() = default;
  EndpointLinks(std::initializer_list<int> links);
  void push_back(int link);
};

// One link of a route and the direction it is crossed in ("up": away from the source's side).
struct Hop {
  int link = 0;
  bool up = true;
};

class Platform {
 public:
  explicit Platform(const ClusterSpec& spec);

  const ClusterSpec& spec() const { return spec_; }
  const std::vector<Link>& links() const { return links_; }
  int num_endpoints() const { return static_cast<int>(endpoint_links_.size()); }
  // Links between an endpoint and the centre.
  std::span<const int> endpoint_links(int endpoint) const {
    const auto& e = endpoint_links_[static_cast<std::size_t>(endpoint)];
    return {e.ids.data(), static_cast<std::size_t>(e.count)};
  }
  std::string endpoint_name(int endpoint) const;
  // Whether exactly one endpoint's links to the centre include `link` (a GPU's NVSwitch port, a
  // NIC without a shared uplink): only routes from or to that endpoint cross it.
  bool private_link(int link) const { return link_users_[static_cast<std::size_t>(link)] == 1; }

  int node_of(int gpu) const { return gpu / spec_.gpus_per_node; }
  int local_of(int gpu) const { return gpu % spec_.gpus_per_node; }
  // Endpoint through which a GPU talks to GPUs of its own node (the NVSwitch port). Compute runs here.
  int fabric_endpoint(int gpu) const { return gpu; }
  // Endpoint of the NIC a GPU uses to leave its node (GPUs share NICs when there are fewer).
  int nic_endpoint(int gpu) const;

  int ps_endpoint(int server) const { return ps_base_ + server; }
  int pcie_endpoint(int gpu) const { return pcie_base_ + gpu; }
  // The node's PCIe switch uplink a GPU's host traffic crosses; -1 when each GPU has its own.
  int pcie_switch_link(int gpu) const;
  int host_endpoint(int node) const { return host_base_ + node; }
  // NVLink SHARP nodes (`intra_nvls`): the node's NVSwitch as an endpoint, which reduces and
  // multicasts; its own link does not block. -1 elsewhere.
  int switch_endpoint(int node) const { return nvs_base_ < 0 ? -1 : nvs_base_ + node; }

  // How many times its bytes an all-reduce of `bytes` inside one node moves at the links'
  // bandwidth, so that it runs at the measured efficiency for its size (1 when none is given).
  double intra_all_reduce_inflation(double bytes) const;
  // Likewise for a collective across nodes, from `inter_efficiency_points`.
  double inter_inflation(double bytes) const;

  std::vector<Hop> route(int src, int dst) const;
  // The same hops appended to `out`: pricing routes many flows per collective and reuses one
  // buffer instead of allocating a route for each.
  void append_route(int src, int dst, std::vector<Hop>& out) const;
  double route_latency(int src, int dst) const;

  // Moving every GPU of a collective between GPUs (not through host memory, not to servers) by
  // `nodes` whole nodes and `locals` places inside its node (each GPU staying in its node) moves
  // each of its endpoints, routes and links alike: links of one kind share bandwidth and latency
  // and endpoints keep their order, so the collective's lowering and time are the same, bit for
  // bit. True where that holds for `locals`: never on a torus; inside nodes only on NVSwitch
  // nodes whose NICs move with the GPUs. Whole nodes alone always do elsewhere.
  bool can_shift(int locals) const;
  // Where `endpoint` goes under that move (servers stay where they are).
  int shift_endpoint(int endpoint, int nodes, int locals) const;

  // The non-star parts, for a simulator that builds them. The link from local GPU i to GPU i + 1
  // of an NVLink-ring node (crossed "up" that way, "down" back); -1 on other fabrics.
  int ring_link(int node, int local) const;
  bool torus() const { return !spec_.torus_dims.empty(); }
  // The link from chip `chip` to its +1 neighbour along dimension `dim` (crossed "up" that way);
  // -1 off a torus or along a dimension of size 1.
  int torus_link(int chip, int dim) const;
  // A chip's coordinate along `dim`, and the chip `steps` further along it (wrapping around).
  int torus_coord(int chip, int dim) const;
  int torus_neighbour(int chip, int dim, int steps) const;
  // Which torus (pod) a chip is on; 0 off a torus.
  int pod_of(int chip) const;
  // Rail-optimised: the NIC endpoint's rail and each rail's spine uplink; -1 elsewhere.
  int rail_of(int endpoint) const;
  int rail_uplink(int rail) const;

 private:
  ClusterSpec spec_;
  std::vector<Link> links_;
  std::vector<EndpointLinks> endpoint_links_;
  std::vector<std::uint8_t> link_users_;  // endpoints listing each link, up to 2
  int ps_base_ = 0, pcie_base_ = 0, host_base_ = 0, switch_base_ = -1;
  int ring_base_ = -1, rail_base_ = -1, torus_base_ = -1, nvs_base_ = -1;
  int pod_chips_ = 1;  // chips per torus (pod)
  int add_endpoint(EndpointLinks links);
};

}  // namespace dtsim::network
