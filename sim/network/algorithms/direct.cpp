// Every rank to every other: the textbook all-reduce, all-to-all at once or round robin.
#include "sim/network/algorithm_registry.hpp"
#include "sim/network/algorithms/builder.hpp"

namespace dtsim::network::algorithms {

using namespace detail;

LoweredCollective naive(const Platform& pf, double bytes, const std::vector<int>& ranks) { return direct(pf, bytes, ranks, 1); }

LoweredCollective direct(const Platform& pf, double per_pair, const std::vector<int>& ranks, int repeats) {
  Builder b(pf);
  for (int rep = 0; rep < repeats; ++rep) {
    for (int a : ranks)
      for (int c : ranks) b.hop(a, c, per_pair);
    b.end_phase();
  }
  return b.done();
}

LoweredCollective round_robin(const Platform& pf, double per_pair, const std::vector<int>& ranks, int repeats) {
  Builder b(pf);
  const std::size_t p = ranks.size();
  for (int rep = 0; rep < repeats; ++rep)
    for (std::size_t k = 1; k < p; ++k) {
      for (std::size_t i = 0; i < p; ++i) b.hop(ranks[i], ranks[(i + k) % p], per_pair);
      b.end_phase();
    }
  return b.done();
}

// Every pair at once, per pass.
FlowCount direct_flows(double p, double passes) { return {passes * p * p, p * p, false}; }
FlowCount naive_flows(double p) { return {p * p, p * p, false}; }
// One partner per round: p flows at a time.
FlowCount round_robin_flows(double p, double passes) { return {passes * p * p, p, false}; }

namespace {
using taskgraph::CollectiveOp;
bool scatters_or_gathers(CollectiveOp op) { return op == CollectiveOp::ReduceScatter || op == CollectiveOp::AllGather; }

// An all-reduce as a scatter then a gather (two rounds), a reduce-scatter, all-gather or
// all-to-all as one, every pair exchanging S/p.
template <LoweredCollective (*Rounds)(const Platform&, double, const std::vector<int>&, int)>
std::optional<LoweredCollective> lower_pairs(const Platform& pf, CollectiveOp op, double bytes, const std::vector<int>& r) {
  const double per_pair = bytes / static_cast<double>(r.size());
  if (op == CollectiveOp::AllReduce) return Rounds(pf, per_pair, r, 2);
  if (scatters_or_gathers(op) || op == CollectiveOp::AllToAll) return Rounds(pf, per_pair, r, 1);
  return std::nullopt;
}
template <FlowCount (*Count)(double, double)>
std::optional<FlowCount> count_pairs(CollectiveOp op, const FlowShape& s) {
  if (op == CollectiveOp::AllReduce) return Count(s.p, 2);
  if (scatters_or_gathers(op) || op == CollectiveOp::AllToAll) return Count(s.p, 1);
  return std::nullopt;
}

std::optional<LoweredCollective> lower_naive(const Platform& pf, CollectiveOp op, double bytes, const std::vector<int>& r) {
  if (op == CollectiveOp::AllReduce) return naive(pf, bytes, r);
  return std::nullopt;
}
std::optional<FlowCount> count_naive(CollectiveOp op, const FlowShape& s) {
  if (op == CollectiveOp::AllReduce) return naive_flows(s.p);
  return std::nullopt;
}
}  // namespace

AlgorithmUnit direct_unit() {
  return {.name = "direct", .doc = "every pair at once: all-to-all, and all-reduce as a direct scatter then gather",
          .lower = lower_pairs<direct>, .flows = count_pairs<direct_flows>, .scatter_gather = true, .linear = true};
}

AlgorithmUnit round_robin_unit() {
  return {.name = "round-robin", .doc = "as direct, in p - 1 rounds of one partner each",
          .lower = lower_pairs<round_robin>, .flows = count_pairs<round_robin_flows>, .scatter_gather = true, .linear = true};
}

AlgorithmUnit naive_unit() {
  return {.name = "naive", .doc = "all-reduce: every rank sends its whole buffer to every other",
          .lower = lower_naive, .flows = count_naive, .linear = true};
}

}  // namespace dtsim::network::algorithms
