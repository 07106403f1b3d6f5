#include "sim/config/cluster_config.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace dtsim::config {

using units::Dimension;

namespace {

Roles parse_roles(Reader r) {
  Roles roles;
  if (auto chief = r.optional_object("chief")) {
    roles.chief = true;
    roles.checkpoint_every_steps = static_cast<int>(chief->integer("checkpoint_every_steps", 1, 100000000));
    roles.checkpoint_bytes = chief->quantity("checkpoint", Dimension::Bytes, Range{0.0, 1e18, true}, 0.0);
    roles.storage_bandwidth = chief->quantity("storage_bandwidth", Dimension::Bandwidth, Range{0.0, 1e15, true});
    chief->finish();
  }
  if (auto ev = r.optional_object("evaluator")) {
    if (!roles.chief) ev->fail_here("an evaluator reads the chief's checkpoints: give cluster.roles.chief");
    roles.evaluator = true;
    roles.evaluator_shares_storage = ev->boolean("shares_storage", true);
    ev->finish();
  }
  r.finish();
  return roles;
}

void parse_intra_node(Reader intra, network::ClusterSpec& c) {
  std::string fabric = intra.choice("fabric", {"nvswitch", "nvlink-ring", "pcie"}, "nvswitch");
  c.fabric = fabric == "pcie" ? network::Fabric::Pcie : fabric == "nvlink-ring" ? network::Fabric::NvLinkRing : network::Fabric::NvSwitch;
  if (c.fabric == network::Fabric::NvLinkRing && c.gpus_per_node < 3)
    intra.fail("fabric", "an NVLink ring needs at least 3 GPUs per node");
  // A PCIe node's GPUs talk through the host bridge; by default it carries one GPU link's worth.
  const auto bridge = intra.optional_quantity("host_bridge_bandwidth", Dimension::Bandwidth, Range{0.0, 1e15, true});
  if (bridge && c.fabric != network::Fabric::Pcie) intra.fail("fabric", "host_bridge_bandwidth is for \"pcie\" nodes");
  c.host_bridge_bandwidth = bridge.value_or(0.0);
  c.intra_bandwidth = intra.quantity("bandwidth", Dimension::Bandwidth, Range{0.0, 1e15, true});
  c.intra_latency = intra.quantity("latency", Dimension::Time, Range{0.0, 1.0});
  c.intra_efficiency = intra.number("efficiency", Range{0.0, 1.0, true}, 1.0);
  if (intra.has("efficiency_points")) c.intra_efficiency_points = intra.efficiency_points("efficiency_points");
  // The NVSwitches reduce (NVLink SHARP); NCCL's model (inter_node.nccl) says when NVLS runs.
  c.intra_nvls = intra.boolean("nvls", false);
  if (c.intra_nvls && c.fabric != network::Fabric::NvSwitch)
    intra.fail("nvls", "NVLink SHARP reduces in NVSwitches: it needs \"fabric\": \"nvswitch\"");
  intra.finish();
}

// The NICs and NCCL's tuning model.
void parse_inter_links(Reader& inter, network::ClusterSpec& c) {
  c.nics_per_node = static_cast<int>(inter.integer("nics_per_node", 1, 576));
  if (c.nics_per_node > c.gpus_per_node)
    inter.fail("nics_per_node", fmt::format("{} NICs for {} GPUs per node: more NICs than GPUs is not modelled",
                                            c.nics_per_node, c.gpus_per_node));
  c.nic_bandwidth = inter.quantity("nic_bandwidth", Dimension::Bandwidth, Range{0.0, 1e15, true});
  c.inter_latency = inter.quantity("latency", Dimension::Time, Range{0.0, 1.0});
  c.inter_efficiency = inter.number("efficiency", Range{0.0, 1.0, true}, 1.0);
  if (inter.has("efficiency_points")) c.inter_efficiency_points = inter.efficiency_points("efficiency_points");
  // NCCL's tuning model for collectives across nodes (sim/network/nccl_tuning.hpp): the GPU
  // generation and host CPU it tunes for; `false` turns it off.
  if (inter.has("nccl") && !(inter.raw("nccl").is_boolean() && !inter.raw("nccl").get<bool>())) {
    if (!inter.raw("nccl").is_object()) inter.fail("nccl", "expected an object {\"gpu\": ..., \"cpu\": ...} or false");
    Reader n = inter.object("nccl");
    const std::string gpu = n.choice("gpu", {"volta", "ampere", "hopper", "blackwell"});
    const std::string cpu = n.choice("cpu", {"intel", "amd", "arm"});
    n.finish();
    using network::nccl::Gpu, network::nccl::Cpu;
    c.nccl_gpu = gpu == "volta" ? Gpu::Volta : gpu == "ampere" ? Gpu::Ampere : gpu == "hopper" ? Gpu::Hopper : Gpu::Blackwell;
    c.nccl_cpu = cpu == "amd" ? Cpu::Amd : cpu == "arm" ? Cpu::Arm : Cpu::Intel;
    if (c.intra_nvls && c.nccl_gpu < Gpu::Hopper)
      inter.fail("nccl", "intra_node.nvls is set, but NCCL runs NVLink SHARP on Hopper or Blackwell GPUs only");
  }
}

void parse_topology(Reader& inter, network::ClusterSpec& c, bool torus) {
  std::string topo =
      inter.choice("topology", {"fat-tree", "rail-optimized", "single-switch", "torus-2d", "torus-3d"}, "fat-tree");
  c.topology = topo == "single-switch"    ? network::Topology::SingleSwitch
               : topo == "rail-optimized" ? network::Topology::RailOptimized
               : topo == "torus-2d"       ? network::Topology::Torus2D
               : topo == "torus-3d"       ? network::Topology::Torus3D
                                          : network::Topology::FatTree;
  if (torus) {
    const std::size_t want = c.topology == network::Topology::Torus2D ? 2 : 3;
    const Json& dims = inter.raw("dimensions");
    if (!dims.is_array() || dims.size() != want)
      inter.fail("dimensions", fmt::format("expected {} chip counts, one per dimension of the {}", want, topo));
    std::int64_t chips = 1;
    for (std::size_t k = 0; k < want; ++k) {
      if (!dims[k].is_number_integer() || dims[k].get<std::int64_t>() < 1 || dims[k].get<std::int64_t>() > 4096)
        inter.fail("dimensions", fmt::format("entry {}: expected an integer from 1 to 4096", k));
      c.torus_dims.push_back(static_cast<int>(dims[k].get<std::int64_t>()));
      chips *= c.torus_dims.back();
    }
    c.torus_pods = static_cast<int>(inter.integer("pods", 1, 1024, 1));
    if (chips % c.gpus_per_node != 0)
      inter.fail("dimensions", fmt::format("{} chips per torus do not fill hosts of {}", chips, c.gpus_per_node));
    const std::int64_t cluster = static_cast<std::int64_t>(c.nodes) * c.gpus_per_node;
    if (chips * c.torus_pods != cluster) {
      const std::string torus = c.torus_pods > 1 ? fmt::format("{} tori of {} chips", c.torus_pods, chips) : fmt::format("{} chips", chips);
      inter.fail("dimensions", fmt::format("{}, but the cluster has {} ({} nodes x {})", torus, cluster, c.nodes, c.gpus_per_node));
    }
    c.torus_link_bandwidth = inter.quantity("link_bandwidth", Dimension::Bandwidth, Range{0.0, 1e15, true});
    c.torus_link_latency = inter.quantity("link_latency", Dimension::Time, Range{0.0, 1.0});
  } else {
    for (const char* k : {"dimensions", "link_bandwidth_GBps", "link_latency_us", "pods"})
      if (inter.has(k)) inter.fail(k, "for \"topology\": \"torus-2d\" or \"torus-3d\"");
  }
  c.oversubscription = inter.number("oversubscription", Range{1.0, 1000.0}, 1.0);
}

void parse_pcie(Reader& pcie, network::ClusterSpec& c) {
  // Each node's PCIe tree between its GPUs and host memory (offload copies, central storage).
  // A node smaller than a preset's switch is one switch; a "pcie" node's GPUs already reach
  // the host through their own links and the host bridge, which this leaves as they are.
  c.gpus_per_pcie_switch = std::min(c.gpus_per_node, static_cast<int>(pcie.integer("gpus_per_switch", 1, 576, 1)));
  if (c.gpus_per_node % c.gpus_per_pcie_switch != 0)
    pcie.fail("gpus_per_switch", fmt::format("{} GPUs per node do not split into switches of {}", c.gpus_per_node, c.gpus_per_pcie_switch));
  c.pcie_switch_bandwidth = pcie.optional_quantity("switch_bandwidth", Dimension::Bandwidth, Range{0.0, 1e15, true}).value_or(0.0);
  c.pcie_latency = pcie.quantity("latency", Dimension::Time, Range{0.0, 1.0}, c.pcie_latency);
  pcie.finish();
}

void parse_background(Reader& bg, network::ClusterSpec& c) {
  // Other jobs on the same network: the share of each kind of link they keep busy.
  const Range share{0.0, 0.99};
  c.background_intra = bg.number("intra_node", share, 0.0);
  c.background_nic = bg.number("nic", share, 0.0);
  c.background_uplink = bg.number("uplink", share, 0.0);
  const bool uplinks = c.topology == network::Topology::RailOptimized ||
                       (c.topology == network::Topology::FatTree && c.oversubscription > 1.0);
  if (c.background_uplink > 0 && !uplinks)
    bg.fail("uplink", "this fabric has no shared uplinks (rail-optimized, or fat-tree with oversubscription > 1)");
  bg.finish();
}

}  // namespace

network::ClusterSpec parse_cluster(Reader r, const std::string& preset, Roles& roles) {
  if (auto ro = r.optional_object("roles")) roles = parse_roles(*ro);
  network::ClusterSpec c;
  c.name = preset.empty() ? "inline" : preset;
  c.nodes = static_cast<int>(r.integer("nodes", 1, kMaxGpus));
  // Up to one NVLink 5 domain: NVLink Switch systems connect up to 576 GPUs (GB200 NVL72 uses 72).
  c.gpus_per_node = static_cast<int>(r.integer("gpus_per_node", 1, 576));
  if (static_cast<std::int64_t>(c.nodes) * c.gpus_per_node > kMaxGpus)
    r.fail("nodes", fmt::format("{} nodes x {} GPUs is more than {} GPUs", c.nodes, c.gpus_per_node, kMaxGpus));
  // On a torus the chips of a node talk over the torus links like any others.
  const Json& inter_json = r.raw("inter_node");
  const bool torus = inter_json.is_object() && inter_json.contains("topology") && inter_json["topology"].is_string() &&
                     inter_json["topology"].get<std::string>().starts_with("torus");
  if (torus && r.has("intra_node")) r.fail("intra_node", "a torus links every chip to its neighbours: leave intra_node out");
  if (!torus) parse_intra_node(r.object("intra_node"), c);
  Reader inter = r.object("inter_node");
  parse_inter_links(inter, c);
  parse_topology(inter, c, torus);
  if (auto ps = r.optional_object("parameter_servers")) {
    c.ps_servers = static_cast<int>(ps->integer("count", 1, 65536));
    c.ps_nic_bandwidth = ps->quantity("nic_bandwidth", Dimension::Bandwidth, Range{0.0, 1e15, true});
    ps->finish();
  }
  if (torus && c.oversubscription != 1.0) inter.fail("oversubscription", "a torus has no switches to oversubscribe");
  if (torus && c.nccl_gpu != network::nccl::Gpu::None) inter.fail("nccl", "NCCL's model is for GPUs on NICs, not a torus");
  if (c.topology == network::Topology::SingleSwitch && c.oversubscription != 1.0)
    inter.fail("oversubscription", "a single switch is not oversubscribed; use \"fat-tree\"");
  inter.finish();
  if (auto pcie = r.optional_object("pcie")) parse_pcie(*pcie, c);
  if (auto bg = r.optional_object("background_traffic")) parse_background(*bg, c);
  r.finish();
  return c;
}

}  // namespace dtsim::config
