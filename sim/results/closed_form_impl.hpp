#pragma once
// ClosedForm's caches (closed_form.cpp) and one strategy's step over them (closed_form_step.cpp).
// Internal to those two files.
#include <array>
#include <bit>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/network/group_prices.hpp"
#include "sim/results/closed_form.hpp"
#include "strategies/buckets.hpp"
#include "strategies/plan.hpp"
#include "strategies/settings.hpp"

namespace dtsim::results {

namespace closed_form_detail {
using Layers = std::vector<const models::Layer*>;
// Plain fields naming a collective and the groups it runs on; see Impl::collective.
using CollectiveKey = std::array<double, 8>;
// (layer, forward, recompute, fused accumulation, tensor group key) -> seconds.
using LayerKey = std::tuple<const models::Layer*, bool, int, bool, int>;
// Looked up twice per layer of every candidate: hashed, not ordered.
struct LayerKeyHash {
  std::size_t operator()(const LayerKey& k) const {
    const auto& [layer, forward, how, fused, where] = k;
    std::uint64_t h = std::bit_cast<std::uintptr_t>(layer);
    h = h * 0x9e3779b97f4a7c15ULL + static_cast<std::uint64_t>(static_cast<std::uint32_t>(where));
    h = h * 0x9e3779b97f4a7c15ULL + static_cast<std::uint64_t>(how) * 4 + (forward ? 2 : 0) + (fused ? 1 : 0);
    return static_cast<std::size_t>(h ^ (h >> 29));
  }
};
inline double params_of(const Layers& ls) {
  double p = 0;
  for (const auto* l : ls) p += l->params();
  return p;
}
}  // namespace closed_form_detail

struct ClosedForm::Impl {
  using CollectiveKey = closed_form_detail::CollectiveKey;
  using LayerKey = closed_form_detail::LayerKey;

  explicit Impl(const config::Scenario& s);

  // A model graph and its parameter set: graphs alike but for the micro-batch share one.
  struct Graph {
    std::unique_ptr<models::ModelGraph> graph;
    int param_set = 0;
  };
  const Graph& graph(const config::Scenario& s);
  void find_twins(models::ModelGraph& g);

  // As the analytical replay prices a collective: lowered once, contention-free (by group
  // shape: sim/network/group_prices.hpp). `groups()` lists the groups; called only when the key
  // is new.
  template <class Groups>
  double collective(const CollectiveKey& key, const taskgraph::Collective& c, Groups&& groups) {
    auto [it, fresh] = collectives.try_emplace(key, 0.0);
    if (fresh) it->second = prices.time(c, groups());
    return it->second;
  }

  // One pass of one layer on the tensor group starting at GPU `tp_base`: its kernels as
  // cost::price_works sums them, plus its inline collectives as simulate() adds them.
  double layer_seconds(const models::Layer& l, bool forward, const models::ModelGraph& g, const strategies::ParallelismSpec& p,
                       const strategies::Checkpoints& ck, int tp_base) {
    return layer_seconds(l, forward, g, p, ck, ck.of(l), group_place(p, tp_base), tp_base);
  }
  // The same with the layer's recomputation `how` and the group's place (group_place) found
  // already: a chunk's layers share the place, and each layer's forward and backward the policy.
  double layer_seconds(const models::Layer& l, bool forward, const models::ModelGraph& g, const strategies::ParallelismSpec& p,
                       const strategies::Checkpoints& ck, strategies::Recompute how, int where, int tp_base);
  // A tensor group inside one node costs the same on every node: keyed by its place in the node.
  int group_place(const strategies::ParallelismSpec& p, int tp_base) const {
    const int gpn = base.cluster.gpus_per_node;
    return p.tensor <= gpn && tp_base / gpn == (tp_base + p.tensor - 1) / gpn ? tp_base % gpn : tp_base + (1 << 30);
  }

  config::Scenario base;
  network::Platform platform;
  network::GroupPrices prices{platform};
  std::string dtype;
  double params = 0;
  std::map<std::tuple<std::int64_t, int, bool>, Graph> graphs;
  std::map<std::pair<int, bool>, int> param_sets;
  std::unordered_map<LayerKey, double, closed_form_detail::LayerKeyHash> layers;
  std::unordered_map<const models::Layer*, const models::Layer*> twin;
  std::map<CollectiveKey, double> collectives, inline_times;
  // Data-parallel collectives: (op and algorithm, where, T, P, D, pipeline outer) -> their
  // groups, and seconds by bytes.
  struct BySize {
    std::vector<std::vector<int>> groups;
    std::size_t shape = 0;
    // Looked up once per bucket of every stage of every strategy: hashed by the bits (std::hash
    // of a double is a byte-wise hash several times slower).
    struct Bits {
      std::size_t operator()(double b) const { return std::hash<std::uint64_t>{}(std::bit_cast<std::uint64_t>(b)) * 0x9e3779b97f4a7c15ULL; }
    };
    std::unordered_map<double, double, Bits> seconds;
  };
  std::map<std::array<double, 6>, BySize> data_prices;
  // Each stage's gradient buckets: (parameter set, chunks, stages, stage, bytes per gradient, caps).
  std::map<std::tuple<int, int, int, int, double, double, double>, std::vector<strategies::Bucket>> buckets;
  // Each stage's parameters: (parameter set, chunks, stages, stage) -> their sum.
  std::map<std::tuple<int, int, int, int>, double> stage_params;

  struct Step;
};

// One strategy's step in closed form: each chunk's passes and the hops between chunks, then the
// pipeline (or ZeRO-3's one stage), and each stage's gradient sync and optimizer step.
struct ClosedForm::Impl::Step {
  using Layers = closed_form_detail::Layers;
  Step(Impl& im, const config::Scenario& s, const Graph& graph, const strategies::Layout& layout)
      : im(im), s(s), p(s.parallelism), t(s.training), g(*graph.graph), param_set(graph.param_set), layout(layout), place(layout.place),
        P(layout.pipeline), T(layout.tensor), D(layout.data), chunks(layout.chunks), micro_batches(layout.micro_batches),
        m(static_cast<double>(micro_batches)),
        gbytes(strategies::wire_grad_bytes(s.parallelism, t.precision)), wbytes(strategies::weight_bytes_per_param(t.precision)) {}

  Impl& im;
  const config::Scenario& s;
  const strategies::ParallelismSpec& p;
  const strategies::TrainingSpec& t;
  const models::ModelGraph& g;
  const int param_set;
  const strategies::Layout& layout;
  const strategies::Placement& place;
  const int P, T, D, chunks;
  const std::int64_t micro_batches;
  const double m, gbytes, wbytes;
  // Each chunk's forward and backward of one micro-batch, and each of its layers' backward.
  std::vector<double> F, B;
  std::vector<std::vector<double>> layer_bwd;
  std::vector<double> hop;  // between chunk j and j + 1
  std::vector<double> f, b;  // per stage
  double sum = 0, worst = 0, worst_f = 0, worst_b = 0, hops = 0;
  std::map<std::pair<int, double>, double> hybrid_prices;

  int rep(int stage) const { return place.gpu(0, stage, 0); }

  void price_passes();
  void price_hops();
  void stage_totals();
  Impl::BySize& data_prices(taskgraph::CollectiveOp op, int st);
  double data_collective(taskgraph::CollectiveOp op, double bytes, int st) { return data_collective(data_prices(op, st), op, bytes, st); }
  double data_collective(Impl::BySize& prices, taskgraph::CollectiveOp op, double bytes, int st);
  double optimizer_seconds(double shard) const;
  double zero3_step();
  double hybrid_collective(taskgraph::CollectiveOp op, double bytes);
  double pipeline_time() const;
  double embedding_sync(const std::vector<double>& last);
  double gradient_sync(int st, const Layers& mine, const std::vector<double>& bwd, double last);
  double stage_end(int st, const std::vector<double>& last, double embedding);
  double param_gather_delay();
  double pipeline_step();
};

}  // namespace dtsim::results
