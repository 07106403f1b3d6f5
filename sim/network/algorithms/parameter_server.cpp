// Parameter servers, a master and its workers, and TensorFlow's central storage.
#include "sim/network/algorithm_registry.hpp"
#include "sim/network/algorithms/builder.hpp"

namespace dtsim::network::algorithms {

using namespace detail;

LoweredCollective master_worker(const Platform& pf, double bytes, const std::vector<int>& ranks) {
  Builder b(pf);
  for (std::size_t i = 1; i < ranks.size(); ++i) b.hop(ranks[i], ranks[0], bytes);
  b.end_phase();
  for (std::size_t i = 1; i < ranks.size(); ++i) b.hop(ranks[0], ranks[i], bytes);
  return b.done();
}

LoweredCollective parameter_server(const Platform& pf, double bytes, const std::vector<int>& ranks, int only,
                                   double apply_factor) {
  Builder b(pf);
  const int dedicated = pf.spec().ps_servers;
  const int shards = dedicated > 0 ? dedicated : static_cast<int>(ranks.size());
  const double share = bytes / shards;
  auto shard_of = [&](int k) { return dedicated > 0 ? -1 : ranks[static_cast<std::size_t>(k)]; };
  const std::vector<int> workers = only >= 0 ? std::vector<int>{only} : ranks;
  for (int w : workers)
    for (int k = 0; k < shards; ++k)
      dedicated > 0 ? b.raw(pf.nic_endpoint(w), pf.ps_endpoint(k), share) : b.hop(w, shard_of(k), share);
  // A shard sums the contributions of S/N it receives (read each, write S/N) at host (or HBM) speed.
  // On dedicated servers that is CPU work each server does for every worker's update, so
  // concurrent updates queue for it; an asynchronous update also runs the optimizer there.
  const double bw = dedicated > 0 ? pf.spec().host_memory_bandwidth : 1e12;
  const double passes = only >= 0 && apply_factor > 0 ? apply_factor : static_cast<double>(workers.size()) + 1.0;
  if (dedicated > 0) {
    b.end_phase();
    for (int k = 0; k < shards; ++k) b.host_work(pf.ps_endpoint(k), passes * share / bw);
  } else {
    b.add_latency(passes * share / bw);
  }
  b.end_phase();
  for (int w : workers)
    for (int k = 0; k < shards; ++k)
      dedicated > 0 ? b.raw(pf.ps_endpoint(k), pf.nic_endpoint(w), share) : b.hop(shard_of(k), w, share);
  return b.done();
}

LoweredCollective central_storage(const Platform& pf, double bytes, const std::vector<int>& ranks, int only) {
  Builder b(pf);
  const std::vector<int> gpus = only >= 0 ? std::vector<int>{only} : ranks;
  for (int g : gpus) b.raw(pf.pcie_endpoint(g), pf.host_endpoint(pf.node_of(g)), bytes);
  b.end_phase();
  for (int g : gpus) b.raw(pf.host_endpoint(pf.node_of(g)), pf.pcie_endpoint(g), bytes);
  return b.done();
}

// A push and a pull per worker.
FlowCount master_worker_flows(double p) { return {2 * p, p, false}; }
// A push and a pull per worker and shard.
FlowCount parameter_server_flows(double p, double shards) { return {2 * p * shards, p * shards, false}; }
FlowCount central_storage_flows(double p) { return {2 * p, p, false}; }

namespace {
using taskgraph::CollectiveOp;
std::optional<LoweredCollective> lower_master_worker(const Platform& pf, CollectiveOp op, double bytes, const std::vector<int>& r) {
  if (op == CollectiveOp::AllReduce) return master_worker(pf, bytes, r);
  return std::nullopt;
}
std::optional<FlowCount> count_master_worker(CollectiveOp op, const FlowShape& s) {
  if (op == CollectiveOp::AllReduce) return master_worker_flows(s.p);
  return std::nullopt;
}

double shards(const ClusterSpec& c, double group) { return c.ps_servers > 0 ? c.ps_servers : group; }
std::optional<LoweredCollective> lower_servers(const Platform& pf, CollectiveOp op, double bytes, const std::vector<int>& r) {
  if (op == CollectiveOp::AllReduce) return parameter_server(pf, bytes, r);
  return std::nullopt;
}
std::optional<FlowCount> count_servers(CollectiveOp op, const FlowShape& s) {
  if (op == CollectiveOp::AllReduce) return parameter_server_flows(s.p, shards(*s.cluster, s.p));
  return std::nullopt;
}
FlowCount count_server_update(const ClusterSpec& c, double group) { return parameter_server_flows(1, shards(c, group)); }

std::optional<LoweredCollective> lower_host(const Platform& pf, CollectiveOp op, double bytes, const std::vector<int>& r) {
  if (op == CollectiveOp::AllReduce) return central_storage(pf, bytes, r);
  return std::nullopt;
}
std::optional<FlowCount> count_host(CollectiveOp op, const FlowShape& s) {
  if (op == CollectiveOp::AllReduce) return central_storage_flows(s.p);
  return std::nullopt;
}
LoweredCollective lower_host_update(const Platform& pf, double bytes, const std::vector<int>& r, int only, double) {
  return central_storage(pf, bytes, r, only);
}
FlowCount count_host_update(const ClusterSpec&, double) { return central_storage_flows(1); }
}  // namespace

AlgorithmUnit master_worker_unit() {
  return {.name = "master-worker", .doc = "all-reduce: every worker sends to the first rank, which sends the sum back",
          .lower = lower_master_worker, .flows = count_master_worker};
}

AlgorithmUnit parameter_server_unit() {
  return {.name = "parameter-server", .doc = "sharded parameter servers (dedicated, or on the workers): push, sum, pull",
          .lower = lower_servers, .flows = count_servers, .server_link = "parameter servers",
          .lower_async = parameter_server, .async_flows = count_server_update};
}

AlgorithmUnit central_storage_unit() {
  return {.name = "central-storage", .doc = "TensorFlow's central storage: variables in the node's host memory, over PCIe",
          .lower = lower_host, .flows = count_host, .server_link = "host memory",
          .lower_async = lower_host_update, .async_flows = count_host_update};
}

}  // namespace dtsim::network::algorithms
