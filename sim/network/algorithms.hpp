#pragma once
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/network/collectives.hpp"

// Each collective algorithm as phases of flows on a platform. `ranks` are GPU ids; the first is
// the root of rooted operations. Bytes follow nccl-tests: S is the full buffer.
namespace dtsim::network::algorithms {

// What lowering and pricing found about hops on one platform: whether a channel's hops cross
// each link once (so run as a chain) and each hop's route latency, and the routes of a phase's
// flows, by their endpoints. A caller that lowers the same groups at many sizes
// (network::GroupPrices, one per platform) keeps one and, while it prices, lets lowering and
// pricing on its thread use it (RememberHops): routing the same hops again was a fifth of a
// sweep's closed form.
// A phase's flows routed: each hop's link direction (2 x link, + 1 down) and the link's
// bandwidth, flow after flow (flow i's hops: [start[i], start[i + 1])), and each flow's route
// latency (its links' latencies summed in route order).
struct RoutedFlows {
  std::vector<std::size_t> slots;
  std::vector<double> bandwidth;
  std::vector<std::size_t> start;
  std::vector<double> latency;
};

// A group's ranks as a hash key (FNV-1a over them), for maps keyed by ranks.
struct RanksHash {
  std::size_t operator()(const std::vector<int>& ranks) const {
    std::uint64_t h = 1469598103934665603ULL;
    for (int r : ranks) h = (h ^ static_cast<std::uint32_t>(r)) * 1099511628211ULL;
    return static_cast<std::size_t>(h);
  }
};

struct HopChecks {
  using Hops = std::vector<std::pair<int, int>>;
  struct Hash {
    std::size_t operator()(const Hops& hops) const {
      std::uint64_t h = 1469598103934665603ULL;
      for (const auto& [a, b] : hops)
        h = (h ^ (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32 | static_cast<std::uint32_t>(b))) * 1099511628211ULL;
      return static_cast<std::size_t>(h);
    }
  };
  std::unordered_map<Hops, std::pair<bool, std::vector<double>>, Hash> seen;
  std::unordered_map<Hops, RoutedFlows, Hash> routes;  // by the flows' endpoints
  std::unordered_map<std::vector<int>, std::vector<std::vector<int>>, RanksHash> ring_orders;  // by the ranks
  std::size_t hops = 0;  // kept in all; past kMaxHops nothing more is kept (memory)
  static constexpr std::size_t kMaxHops = std::size_t{1} << 20;
};

// The checks lowering on this thread may use, while one of these is alive.
class RememberHops {
 public:
  explicit RememberHops(HopChecks& checks) : previous_(now()) { now() = &checks; }
  ~RememberHops() { now() = previous_; }
  RememberHops(const RememberHops&) = delete;
  RememberHops& operator=(const RememberHops&) = delete;
  static HopChecks* current() { return now(); }

 private:
  static HopChecks*& now() {
    thread_local HopChecks* checks = nullptr;
    return checks;
  }
  HopChecks* previous_;
};

// How many flows each lowering makes, for the budget's bound before anything is built
// (flow_bound.cpp): in all, in its widest phase, and whether its hops run as chains. Each is beside
// its lowering and counts one group of p ranks; `channels` is the ring channels a group leaving its
// node runs (one per NIC), `passes` 2 for an all-reduce and 1 for a reduce-scatter or all-gather.
struct FlowCount {
  double flows = 0, widest = 0;
  bool chained = false;
};
FlowCount ring_flows(double p, double channels);  // also the ring channels' broadcast and reduce chains
FlowCount torus_flows(double p, double dimensions, double passes);  // added to the ring's
FlowCount double_tree_flows(double p, double channels);
FlowCount binomial_flows(double p);
FlowCount halving_doubling_flows(double p, double passes);
FlowCount hierarchical_flows(double p);
FlowCount direct_flows(double p, double passes);  // passes 1: an all-to-all
FlowCount naive_flows(double p);
FlowCount round_robin_flows(double p, double passes);
FlowCount master_worker_flows(double p);
FlowCount parameter_server_flows(double p, double shards);
FlowCount central_storage_flows(double p);
FlowCount nvls_flows(double p, bool spans_nodes);  // nvls.cpp

// Ring over `passes` x (p-1) steps of S/p per hop: all-reduce 2, reduce-scatter/all-gather 1.
// Across nodes one ring per NIC (NCCL's channels), each leaving its node through another NIC.
LoweredCollective ring(const Platform& pf, double bytes, const std::vector<int>& ranks, double passes);
// The dimensions along which a group of chips is a whole sub-torus: every chip that shares the
// first chip's coordinates in the other dimensions, each once (a tensor-parallel group along one
// dimension, a data-parallel group over the others). Empty where it is not one, or off a torus.
std::vector<int> torus_span(const Platform& pf, const std::vector<int>& ranks);
// The all-reduce of a torus (TPU pods) or of such a sub-torus: a reduce-scatter along each
// spanned dimension in turn, each line of the group's chips a bidirectional ring over what its
// chips hold (S, then S/d_0, then S/(d_0 d_1)), then the all-gather back in reverse order.
LoweredCollective torus_rings(const Platform& pf, double bytes, const std::vector<int>& ranks, const std::vector<int>& spanned,
                              bool scatter, bool gather);
// Its time on links of bandwidth B (per direction) and latency alpha, `passes` 2 for an
// all-reduce and 1 for a reduce-scatter or all-gather:
//   passes x sum over dimensions i of [(d_i - 1)/d_i x S/(d_0 ... d_{i-1}) / (2B) + (d_i - 1) alpha].
double torus_closed_form(const std::vector<int>& dims, double bytes, double passes, double alpha, double bandwidth);
// NCCL's broadcast and reduce: each ring channel (as `ring`'s) a pipelined chain from the root
// (broadcast) or toward it (reduce) carrying S / channels, so across nodes every NIC carries a
// share: time (p - 1) alpha + S / (channels x B), busbw = algbw = channels x B (nccl-tests).
LoweredCollective ring_chain(const Platform& pf, double bytes, const std::vector<int>& ranks, bool toward_root);
// Pipelined chain from the first rank to the next (a send-receive): every hop carries S.
LoweredCollective chain(const Platform& pf, double bytes, const std::vector<int>& ranks, bool toward_root);
// NCCL's double binary tree: two trees, each reducing then broadcasting half of S, pipelined;
// across nodes the trees join node leaders and each node is a chain.
LoweredCollective double_tree(const Platform& pf, double bytes, const std::vector<int>& ranks);
// Rabenseifner: recursive-halving reduce-scatter and/or recursive-doubling all-gather, one phase
// per step; ranks beyond a power of two fold in first and receive the result last.
LoweredCollective halving_doubling(const Platform& pf, double bytes, const std::vector<int>& ranks, bool scatter, bool gather);
// Reduce-scatter inside each node, all-reduce across nodes per local rank, all-gather inside.
LoweredCollective hierarchical(const Platform& pf, double bytes, const std::vector<int>& ranks);
// Every rank sends `per_pair` bytes to every other rank at once (phases = 1) or in p-1 rounds of
// one partner each (round robin: rank i sends to i+k in round k).
// The textbook all-to-all all-reduce: every rank sends its whole buffer S to every other and sums
// what it receives, one phase; (p - 1) S leaves each rank, against the ring's 2 (p - 1) S / p.
LoweredCollective naive(const Platform& pf, double bytes, const std::vector<int>& ranks);
LoweredCollective direct(const Platform& pf, double per_pair, const std::vector<int>& ranks, int repeats);
LoweredCollective round_robin(const Platform& pf, double per_pair, const std::vector<int>& ranks, int repeats);
// Gather S from every worker to the root, then send S back to each (a parameter server's
// push and pull).
LoweredCollective master_worker(const Platform& pf, double bytes, const std::vector<int>& ranks);
// Synchronous parameter servers: every worker pushes S/N to each of N shards, the shards sum
// (host memory bandwidth), every worker pulls S/N back. Shards on the platform's dedicated
// servers when it has them, else on the first N workers (colocated). With `only` one worker's
// asynchronous push and pull: the shards take its contribution alone, with `apply_factor` bytes
// of optimizer traffic per byte received when given.
LoweredCollective parameter_server(const Platform& pf, double bytes, const std::vector<int>& ranks, int only = -1,
                                   double apply_factor = 0);
// TensorFlow's central storage: variables in the node's host memory; each GPU sends S over PCIe,
// the host sums, each GPU reads S back. With `only` one GPU's update alone (Hogwild, EASGD).
LoweredCollective central_storage(const Platform& pf, double bytes, const std::vector<int>& ranks, int only = -1);
// NVLink SHARP (nvls.cpp): all-reduce, reduce-scatter or all-gather through each node's switch,
// which reduces and multicasts; an all-reduce across nodes is NCCL's NVLS tree.
LoweredCollective nvls(const Platform& pf, taskgraph::CollectiveOp op, double bytes, const std::vector<int>& ranks);
// Binomial tree, one phase per level, S per edge.
LoweredCollective binomial(const Platform& pf, double bytes, const std::vector<int>& ranks, bool toward_root);

}  // namespace dtsim::network::algorithms
