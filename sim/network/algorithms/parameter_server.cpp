// Parameter servers, a master and its workers, and TensorFlow's central storage.
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

}  // namespace dtsim::network::algorithms
