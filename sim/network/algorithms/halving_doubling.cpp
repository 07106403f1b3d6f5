// Rabenseifner's recursive halving and doubling.
#include "sim/network/algorithm_registry.hpp"
#include "sim/network/algorithms/builder.hpp"

namespace dtsim::network::algorithms {

using namespace detail;

namespace {
// One step of a butterfly: every rank with its partner at distance d, all in lockstep.
template <class Rank>
std::vector<std::pair<int, int>> exchange(const Builder& b, int q, int d, Rank r) {
  std::vector<std::pair<int, int>> hops;
  for (int i = 0; i < q; ++i) hops.push_back(b.endpoints(r(i), r(i ^ d)));
  return hops;
}
}  // namespace

LoweredCollective halving_doubling(const Platform& pf, double bytes, const std::vector<int>& ranks, bool scatter, bool gather) {
  Builder b(pf);
  const int p = static_cast<int>(ranks.size());
  if (p < 2) return b.done();
  const int q = floor_pow2(p), extra = p - q;
  auto r = [&](int i) { return ranks[static_cast<std::size_t>(i)]; };
  for (int i = 0; i < extra; ++i) b.hop(r(q + i), r(i), bytes);  // fold the extra ranks in
  b.end_phase();
  // Halving exchanges S/2 with the nearest partner first, so the largest messages stay inside a
  // node (ranks are in node order); doubling mirrors it.
  if (scatter)
    for (int d = 1, k = 1; d < q; d *= 2, ++k) {
      b.chain(exchange(b, q, d, r), bytes / (1 << k));
      b.end_phase();
    }
  if (gather)
    for (int d = q / 2, k = static_cast<int>(std::log2(q)); d >= 1; d /= 2, --k) {
      b.chain(exchange(b, q, d, r), bytes / (1 << k));
      b.end_phase();
    }
  for (int i = 0; i < extra; ++i) b.hop(r(i), r(q + i), bytes);
  return b.done();
}


// Every rank once per step, log2(p) steps and the fold-in, per pass.
FlowCount halving_doubling_flows(double p, double passes) {
  return {passes * p * (std::ceil(std::log2(p)) + 1), p, true};
}

namespace {
using taskgraph::CollectiveOp;
std::optional<LoweredCollective> lower_halving_doubling(const Platform& pf, CollectiveOp op, double bytes, const std::vector<int>& r) {
  if (op == CollectiveOp::AllReduce) return halving_doubling(pf, bytes, r, true, true);
  if (op == CollectiveOp::ReduceScatter || op == CollectiveOp::AllGather)
    return halving_doubling(pf, bytes, r, op == CollectiveOp::ReduceScatter, op == CollectiveOp::AllGather);
  return std::nullopt;
}
std::optional<FlowCount> count_halving_doubling(CollectiveOp op, const FlowShape& s) {
  if (op == CollectiveOp::AllReduce) return halving_doubling_flows(s.p, 2);
  if (op == CollectiveOp::ReduceScatter || op == CollectiveOp::AllGather) return halving_doubling_flows(s.p, 1);
  return std::nullopt;
}
}  // namespace

AlgorithmUnit halving_doubling_unit() {
  return {.name = "halving-doubling", .doc = "Rabenseifner's recursive halving reduce-scatter and doubling all-gather",
          .lower = lower_halving_doubling, .flows = count_halving_doubling, .scatter_gather = true, .linear = true};
}

}  // namespace dtsim::network::algorithms
