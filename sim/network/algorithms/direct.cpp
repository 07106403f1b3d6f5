// Every rank to every other: the textbook all-reduce, all-to-all at once or round robin.
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

}  // namespace dtsim::network::algorithms
