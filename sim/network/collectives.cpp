#include "sim/network/collectives.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <utility>

namespace dtsim::network {

namespace {

// A ring as NCCL builds it across nodes: one ring (channel) per NIC, each entering a node at a
// different GPU so that every channel leaves through a different NIC. All-reduce sends 2(p-1)/p
// of the buffer over every hop in 2(p-1) steps; reduce-scatter and all-gather half of that.
LoweredCollective ring(const Platform& pf, double bytes, const std::vector<int>& ranks, double passes) {
  LoweredCollective out;
  const int p = static_cast<int>(ranks.size());
  if (p < 2 || bytes <= 0) return out;

  std::vector<std::vector<int>> by_node;  // members of each node, in node order
  std::map<int, std::size_t> node_index;
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  for (int g : sorted) {
    auto [it, fresh] = node_index.try_emplace(pf.node_of(g), by_node.size());
    if (fresh) by_node.emplace_back();
    by_node[it->second].push_back(g);
  }
  std::size_t widest = 0;
  for (const auto& m : by_node) widest = std::max(widest, m.size());
  const int channels = by_node.size() > 1 ? std::max(1, std::min(pf.spec().nics_per_node, static_cast<int>(widest))) : 1;
  const double per_hop = passes * (p - 1) / p * bytes / channels;

  std::map<std::pair<int, int>, double> merged;  // flows sharing a route run as one
  double alpha = 0;
  for (int c = 0; c < channels; ++c) {
    std::vector<int> order;
    for (const auto& members : by_node) {
      const std::size_t n = members.size();
      const std::size_t entry = static_cast<std::size_t>(c) * n / static_cast<std::size_t>(channels);
      for (std::size_t i = 0; i < n; ++i) order.push_back(members[(entry + i) % n]);
    }
    for (int i = 0; i < p; ++i) {
      int a = order[static_cast<std::size_t>(i)], b = order[static_cast<std::size_t>((i + 1) % p)];
      bool same_node = pf.node_of(a) == pf.node_of(b);
      int src = same_node ? pf.fabric_endpoint(a) : pf.nic_endpoint(a);
      int dst = same_node ? pf.fabric_endpoint(b) : pf.nic_endpoint(b);
      merged[{src, dst}] += per_hop;
      alpha = std::max(alpha, pf.route_latency(src, dst));
    }
  }
  for (const auto& [route, b] : merged) out.flows.push_back({route.first, route.second, b});
  // Every step waits for its slowest hop; the flows already paid one step's latency.
  out.extra_latency = (passes * (p - 1) - 1.0) * alpha;
  return out;
}

LoweredCollective send_recv(const Platform& pf, double bytes, int src, int dst) {
  LoweredCollective out;
  if (src == dst || bytes <= 0) return out;
  bool same_node = pf.node_of(src) == pf.node_of(dst);
  out.flows.push_back({same_node ? pf.fabric_endpoint(src) : pf.nic_endpoint(src),
                       same_node ? pf.fabric_endpoint(dst) : pf.nic_endpoint(dst), bytes});
  return out;
}

}  // namespace

LoweredCollective lower(const Platform& pf, taskgraph::CollectiveOp op, taskgraph::Algorithm a, double bytes,
                        const std::vector<int>& ranks) {
  using taskgraph::CollectiveOp;
  if (a != taskgraph::Algorithm::Ring) throw std::invalid_argument("only the ring algorithm is implemented");
  switch (op) {
    case CollectiveOp::AllReduce: return ring(pf, bytes, ranks, 2.0);
    case CollectiveOp::ReduceScatter:
    case CollectiveOp::AllGather: return ring(pf, bytes, ranks, 1.0);
    case CollectiveOp::SendRecv:
      if (ranks.size() != 2) throw std::invalid_argument("send_recv needs a source and a destination");
      return send_recv(pf, bytes, ranks[0], ranks[1]);
    default:
      throw std::invalid_argument(std::string("collective not implemented yet: ") + taskgraph::to_string(op));
  }
}

LoweredCollective lower(const Platform& pf, const taskgraph::Collective& c, const std::vector<std::vector<int>>& groups) {
  if (groups.size() == 1) return lower(pf, c.op, c.algorithm, c.bytes, groups[0]);
  LoweredCollective out;
  std::map<std::pair<int, int>, double> merged;
  for (const auto& g : groups) {
    auto one = lower(pf, c.op, c.algorithm, c.bytes, g);
    out.extra_latency = std::max(out.extra_latency, one.extra_latency);
    for (const auto& f : one.flows) merged[{f.src, f.dst}] += f.bytes;
  }
  for (const auto& [route, b] : merged) out.flows.push_back({route.first, route.second, b});
  return out;
}

double inline_time(const Platform& pf, const taskgraph::InlineCollective& c, const std::vector<int>& ranks) {
  return c.count * analytical_time(pf, lower(pf, c.op, taskgraph::Algorithm::Ring, c.bytes, ranks));
}

double analytical_time(const Platform& pf, const LoweredCollective& lc) {
  // bytes crossing each link direction: index*2 for up, index*2+1 for down
  std::vector<double> load(pf.links().size() * 2, 0.0);
  for (const auto& f : lc.flows) {
    for (int l : pf.endpoint_links(f.src)) load[static_cast<std::size_t>(l) * 2] += f.bytes;
    for (int l : pf.endpoint_links(f.dst)) load[static_cast<std::size_t>(l) * 2 + 1] += f.bytes;
  }
  double worst = 0;
  for (const auto& f : lc.flows) {
    double t = 0;
    for (int l : pf.endpoint_links(f.src))
      t = std::max(t, load[static_cast<std::size_t>(l) * 2] / pf.links()[static_cast<std::size_t>(l)].bandwidth);
    for (int l : pf.endpoint_links(f.dst))
      t = std::max(t, load[static_cast<std::size_t>(l) * 2 + 1] / pf.links()[static_cast<std::size_t>(l)].bandwidth);
    worst = std::max(worst, t + pf.route_latency(f.src, f.dst));
  }
  return worst + (lc.flows.empty() ? 0.0 : lc.extra_latency);
}

double ring_all_reduce_closed_form(int p, double bytes, double alpha, double bandwidth) {
  if (p < 2) return 0;
  return 2.0 * (p - 1) * (alpha + bytes / (p * bandwidth));
}

}  // namespace dtsim::network
