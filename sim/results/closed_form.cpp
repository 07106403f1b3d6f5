#include "sim/results/closed_form.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "sim/config/build_options.hpp"
#include "sim/cost/comm_interference.hpp"
#include "sim/network/collectives.hpp"
#include "sim/network/group_prices.hpp"
#include "sim/results/inline_comm.hpp"
#include "strategies/buckets.hpp"
#include "strategies/placement.hpp"
#include "strategies/plan.hpp"
#include "strategies/settings.hpp"
#include "strategies/unit.hpp"
#include "strategies/units/zero.hpp"
#include "strategies/works.hpp"

namespace dtsim::results {

using strategies::Recompute;
using taskgraph::CollectiveOp;
using Layers = std::vector<const models::Layer*>;

namespace {
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

double params_of(const Layers& ls) {
  double p = 0;
  for (const auto* l : ls) p += l->params();
  return p;
}
}  // namespace

struct ClosedForm::Impl {
  explicit Impl(const config::Scenario& s) : base(s), platform(s.cluster), dtype(config::compute_dtype(s.training.precision)) {
    params = s.model.build(config::whole_model_options(s)).params();
  }

  const models::ModelGraph& graph(const config::Scenario& s) {
    const auto& p = s.parallelism;
    auto& slot = graphs[{p.micro_batch, p.tensor, p.sequence_parallel}];
    // Keyed by what varies between the strategies the closed form knows (closed_form_gap: no
    // context or expert parallelism, no FP8).
    if (!slot) {
      slot = std::make_unique<models::ModelGraph>(s.model.build(config::build_options(s)));
      find_twins(*slot);
      // The micro-batch sizes only scale activations: graphs of one tensor split hold the same
      // parameters, op by op, and so fill the same gradient buckets.
      param_set[slot.get()] = param_sets.try_emplace({p.tensor, p.sequence_parallel}, static_cast<int>(param_sets.size())).first->second;
    }
    return *slot;
  }

  // Layers that differ only by name (a transformer's blocks) price alike: the first of each
  // kind stands for the others in the layer cache, so a 96-block model prices one block.
  // The names are set aside while the layers are compared, so nothing is copied.
  void find_twins(models::ModelGraph& g) {
    std::vector<std::string> names;
    for (auto& l : g.layers) names.push_back(std::exchange(l.name, {}));
    std::vector<const models::Layer*> firsts;
    for (const auto& l : g.layers) {
      auto same = std::find_if(firsts.begin(), firsts.end(), [&](const models::Layer* f) { return *f == l; });
      twin[&l] = same == firsts.end() ? firsts.emplace_back(&l) : *same;
    }
    for (std::size_t i = 0; i < names.size(); ++i) g.layers[i].name = std::move(names[i]);
  }

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
  // A tensor group inside one node costs the same on every node: keyed by its place in the node.
  int group_place(const strategies::ParallelismSpec& p, int tp_base) const {
    const int gpn = base.cluster.gpus_per_node;
    return p.tensor <= gpn && tp_base / gpn == (tp_base + p.tensor - 1) / gpn ? tp_base % gpn : tp_base + (1 << 30);
  }
  // The same with the layer's recomputation `how` and the group's place (group_place) found
  // already: a chunk's layers share the place, and each layer's forward and backward the policy.
  double layer_seconds(const models::Layer& l, bool forward, const models::ModelGraph& g, const strategies::ParallelismSpec& p,
                       const strategies::Checkpoints& ck, strategies::Recompute how, int where, int tp_base) {
    auto [it, fresh] = layers.try_emplace(LayerKey{twin.at(&l), forward, static_cast<int>(how), p.fused_grad_accumulation, where}, 0.0);
    if (!fresh) return it->second;
    const Layers one{&l};
    const auto w = forward ? strategies::forward_work(one, g, p, 0) : strategies::backward_work(one, g, p, 0, {}, &ck);
    double s = 0;
    for (const auto& k : w.kernels) s += cost::quote_kernel(base.device, k, dtype).seconds;
    s *= w.repeat;
    for (const auto& c : w.comms) {
      // Blocks of one size and their recomputed forwards share these: lowered once.
      auto alone = [&](double bytes) {
        auto [at, first] = inline_times.try_emplace(
            CollectiveKey{5, static_cast<double>(c.op), bytes, static_cast<double>(where), static_cast<double>(p.tensor)}, 0.0);
        if (first) {
          std::vector<int> ranks(static_cast<std::size_t>(p.tensor));
          for (int t = 0; t < p.tensor; ++t) ranks[static_cast<std::size_t>(t)] = tp_base + t;
          at->second = network::inline_time(platform, {c.op, c.group, bytes, 1.0}, ranks);
        }
        return at->second;
      };
      // As simulate() prices them (inline_comm.hpp), overlap included.
      const double kernel = c.hidden_by < 0 ? 0.0 : cost::quote_kernel(base.device, w.kernels[static_cast<std::size_t>(c.hidden_by)], dtype).seconds;
      const auto one = inline_cost(c, c.count * alone(c.bytes), alone, kernel, cost::sm_share(base.device, c.margin_sms));
      s += one.exposed + one.interference;
    }
    it->second = s + w.fixed_seconds;
    return it->second;
  }

  config::Scenario base;
  network::Platform platform;
  network::GroupPrices prices{platform};
  std::string dtype;
  double params = 0;
  std::map<std::tuple<std::int64_t, int, bool>, std::unique_ptr<models::ModelGraph>> graphs;
  // Each graph's parameter set: graphs alike but for the micro-batch share one.
  std::map<std::pair<int, bool>, int> param_sets;
  std::unordered_map<const models::ModelGraph*, int> param_set;
  std::unordered_map<LayerKey, double, LayerKeyHash> layers;
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

ClosedForm::ClosedForm(const config::Scenario& base) : impl_(std::make_unique<Impl>(base)) {}
ClosedForm::~ClosedForm() = default;

// One strategy's step in closed form: each chunk's passes and the hops between chunks, then the
// pipeline (or ZeRO-3's one stage), and each stage's gradient sync and optimizer step.
struct ClosedForm::Impl::Step {
  Step(Impl& im, const config::Scenario& s, const models::ModelGraph& g, const strategies::Layout& layout)
      : im(im), s(s), p(s.parallelism), t(s.training), g(g), layout(layout), place(layout.place), P(layout.pipeline),
        T(layout.tensor), D(layout.data), chunks(layout.chunks), micro_batches(layout.micro_batches),
        m(static_cast<double>(micro_batches)),
        gbytes(strategies::wire_grad_bytes(s.parallelism, t.precision)), wbytes(strategies::weight_bytes_per_param(t.precision)) {}

  Impl& im;
  const config::Scenario& s;
  const strategies::ParallelismSpec& p;
  const strategies::TrainingSpec& t;
  const models::ModelGraph& g;
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

  int rep(int stage) const { return place.gpu(0, stage, 0); }

  void price_passes() {
    F.assign(static_cast<std::size_t>(chunks), 0.0);
    B = F;
    layer_bwd.assign(static_cast<std::size_t>(chunks), {});
    for (int j = 0; j < chunks; ++j) {
      const int base = rep(j % P), where = im.group_place(p, base);
      const auto& ls = layout.chunk_layers[static_cast<std::size_t>(j)];
      layer_bwd[static_cast<std::size_t>(j)].reserve(ls.size());
      // A chunk is mostly a run of twin blocks recomputed alike: each looked up once per run.
      const models::Layer* twin = nullptr;
      auto how = Recompute::None;
      double f = 0, b = 0;
      for (const auto* l : ls) {
        const auto* t = im.twin.at(l);
        const auto h = layout.checkpoints.of(*l);
        if (t != twin || h != how) {
          twin = t, how = h;
          f = im.layer_seconds(*l, true, g, p, layout.checkpoints, how, where, base);
          b = im.layer_seconds(*l, false, g, p, layout.checkpoints, how, where, base);
        }
        F[static_cast<std::size_t>(j)] += f;
        B[static_cast<std::size_t>(j)] += b;
        layer_bwd[static_cast<std::size_t>(j)].push_back(b);
      }
    }
  }

  // Transfer between chunk j and j + 1 (activations forward, their gradients back): the
  // send of one rank's share, then the receiving group's all-gather without sequence parallelism.
  void price_hops() {
    hop.assign(static_cast<std::size_t>(std::max(0, chunks - 1)), 0.0);
    for (int j = 0; j + 1 < chunks; ++j) {
      const int a = rep(j % P), b = rep((j + 1) % P);
      const double tensor = layout.chunk_layers[static_cast<std::size_t>(j)].back()->output_bytes;
      const double bytes = tensor / T;
      taskgraph::Collective send{CollectiveOp::SendRecv, p.algorithm, {0}, bytes};
      double h = im.collective({1, static_cast<double>(p.algorithm), bytes, static_cast<double>(a), static_cast<double>(b)}, send,
                               [&] { return std::vector<std::vector<int>>{{a, b}}; });
      if (T > 1 && !p.sequence_parallel) {
        const int first = place.gpu(0, (j + 1) % P, 0);
        taskgraph::Collective gather{CollectiveOp::AllGather, p.algorithm, {0}, tensor};
        h += im.collective({2, static_cast<double>(p.algorithm), tensor, static_cast<double>(first), static_cast<double>(T)}, gather,
                           [&] { return std::vector<std::vector<int>>{place.tensor_group(0, (j + 1) % P)}; });
      }
      hop[static_cast<std::size_t>(j)] = h;
    }
  }

  // Each stage's forward and backward over its chunks, their sum and the slowest stage's.
  void stage_totals() {
    f.assign(static_cast<std::size_t>(P), 0.0);
    b = f;
    for (int j = 0; j < chunks; ++j) {
      f[static_cast<std::size_t>(j % P)] += F[static_cast<std::size_t>(j)];
      b[static_cast<std::size_t>(j % P)] += B[static_cast<std::size_t>(j)];
    }
    for (int st = 0; st < P; ++st) {
      const auto i = static_cast<std::size_t>(st);
      sum += f[i] + b[i];
      worst = std::max(worst, f[i] + b[i]);
      worst_f = std::max(worst_f, f[i]);
      worst_b = std::max(worst_b, b[i]);
    }
    for (double h : hop) hops += 2 * h;
  }

  // Data-parallel collectives of stage `st`, all tensor ranks' groups at once.
  // Stage st's data-parallel collectives of `op` (all tensor ranks' groups at once), by size.
  // With whole nodes per pipeline step (T x P a multiple of the node), stage st's groups are
  // stage 0's moved by whole nodes, except for where they sit in the node (rails): keyed so.
  Impl::BySize& data_prices(CollectiveOp op, int st) {
    const int gpn = s.cluster.gpus_per_node;
    const double where = !p.pipeline_outer && (T * P) % gpn == 0 ? (T * st) % gpn : st;
    return im.data_prices[{static_cast<double>(op) * 256 + static_cast<double>(p.algorithm), where, static_cast<double>(T),
                           static_cast<double>(P), static_cast<double>(D), p.pipeline_outer ? 1.0 : 0.0}];
  }
  double data_collective(CollectiveOp op, double bytes, int st) { return data_collective(data_prices(op, st), op, bytes, st); }
  double data_collective(Impl::BySize& prices, CollectiveOp op, double bytes, int st) {
    auto [it, fresh] = prices.seconds.try_emplace(bytes, 0.0);
    if (fresh) {
      if (prices.groups.empty()) {  // the first size asked: the groups and their shape, kept for the others
        for (int k = 0; k < T; ++k) prices.groups.push_back(place.data_group(st, k));
        prices.shape = im.prices.shape(prices.groups);
      }
      it->second = im.prices.time({op, p.algorithm, {}, bytes}, prices.groups, prices.shape);
    }
    return it->second;
  }

  double optimizer_seconds(double shard) const {
    return cost::quote_kernel(s.device, models::optimizer_kernel(t.optimizer, shard, strategies::update_path(t.precision)), im.dtype)
        .seconds;
  }

  // One stage, every layer's parameters gathered before its forward and backward: ZeRO-3's term
  // (strategies/units/zero.hpp) over these prices.
  double zero3_step() {
    const Layers& ls = layout.chunk_layers[0];
    strategies::Zero3Prices z;
    z.micro_batches = micro_batches;
    const bool hybrid = strategies::hybrid_shard(p);
    // The stage's gathers and reduce-scatters, looked up once for all its layers.
    auto& gathers = data_prices(CollectiveOp::AllGather, 0);
    auto& reduces = data_prices(CollectiveOp::ReduceScatter, 0);
    for (std::size_t i = 0; i < ls.size(); ++i) {
      const double n = ls[i]->params();
      if (hybrid) {  // HSDP: in the shard groups, then the shard's all-reduce across replicas
        z.gather.push_back(hybrid_collective(CollectiveOp::AllGather, n * wbytes));
        z.reduce.push_back(hybrid_collective(CollectiveOp::ReduceScatter, n * gbytes) +
                           hybrid_collective(CollectiveOp::AllReduce, n * gbytes / layout.shard_ranks));
      } else {
        z.gather.push_back(data_collective(gathers, CollectiveOp::AllGather, n * wbytes, 0));
        z.reduce.push_back(data_collective(reduces, CollectiveOp::ReduceScatter, n * gbytes, 0));
      }
      z.forward.push_back(im.layer_seconds(*ls[i], true, g, p, layout.checkpoints, rep(0)));
    }
    z.backward = layer_bwd[0];
    z.optimizer = optimizer_seconds(params_of(ls) / layout.shard_ranks);
    return strategies::zero3_step_seconds(z);
  }

  // HSDP's collectives on one stage: gathers and reduce-scatters over every shard group, the
  // all-reduce over every replicate group (strategies/plan_hybrid.cpp), by operation and size.
  double hybrid_collective(CollectiveOp op, double bytes) {
    auto [it, fresh] = hybrid_prices.try_emplace({static_cast<int>(op), bytes}, 0.0);
    if (!fresh) return it->second;
    std::vector<std::vector<int>> groups;
    const int S = p.shard_size;
    for (int k = 0; k < T; ++k)
      for (int j = 0; j < (op == CollectiveOp::AllReduce ? S : D / S); ++j)
        groups.push_back(op == CollectiveOp::AllReduce ? place.replicate_group(0, k, 0, j, S) : place.shard_group(0, k, j * S, S));
    it->second = im.prices.time({op, p.algorithm, {}, bytes}, groups, im.prices.shape(groups));
    return it->second;
  }
  std::map<std::pair<int, double>, double> hybrid_prices;

  // The passes of every micro-batch through the pipeline, up to the last backward on stage 0: the
  // schedule's own term (strategies/schedules/).
  double pipeline_time() const {
    if (!p.schedule->closed_form) throw std::logic_error("the pipeline schedule has no closed form (closed_form_gap)");
    return p.schedule->closed_form({.stages = P, .micro_batches = m, .F = F, .B = B, .f = f, .b = b, .sum = sum, .worst = worst,
                                    .worst_f = worst_f, .worst_b = worst_b, .hops = hops});
  }

  // Tied embeddings on different stages: the first and last stage sum the table's gradients.
  double embedding_sync(const std::vector<double>& last) {
    if (!(P > 1 && g.tied_params > 0)) return 0;
    auto groups = [&] {
      std::vector<std::vector<int>> out;
      for (int d = 0; d < D; ++d)
        for (int k = 0; k < T; ++k) out.push_back({place.gpu(d, 0, k), place.gpu(d, P - 1, k)});
      return out;
    };
    const double bytes = g.tied_params * gbytes;
    taskgraph::Collective c{CollectiveOp::AllReduce, p.algorithm, {}, bytes};
    return std::max(last[0], last[static_cast<std::size_t>(P - 1)]) +
           im.collective({4, static_cast<double>(p.algorithm), bytes, static_cast<double>(T), static_cast<double>(P),
                          static_cast<double>(D), p.pipeline_outer ? 1.0 : 0.0},
                         c, groups);
  }

  // Stage st's gradient buckets: they go as the final backward produces them (in reverse layer
  // order, ending at `last`), one after another; without overlap, after the whole backward.
  // Returns when the last has been summed.
  double gradient_sync(int st, const Layers& mine, const std::vector<double>& bwd, double last) {
    std::vector<double> done(mine.size(), last);
    if (p.overlap_grad_reduce) {
      // Within a chunk, layer k's backward ends after the ones above it. Interleaved, local
      // chunk c's last backward comes p passes of each lower chunk before chunk c - 1's
      // (Megatron's cool-down runs each chunk's last p micro-batches in turn).
      std::size_t k = 0;
      double chunk_end = last;
      for (int j = st; j < chunks; j += P) {
        double at = chunk_end;
        for (std::size_t n = 0; n < layout.chunk_layers[static_cast<std::size_t>(j)].size(); ++n, ++k) {
          done[k] = at;
          at -= bwd[k];
        }
        chunk_end -= P * B[static_cast<std::size_t>(j)];
      }
    }
    // Strategies with the same stages over the same parameters fill the same buckets: made once.
    auto [at, made] = im.buckets.try_emplace({im.param_set.at(&g), chunks, P, st, gbytes, p.bucket_bytes, p.first_bucket_bytes});
    if (made) at->second = strategies::make_buckets(mine, gbytes, p.bucket_bytes, p.first_bucket_bytes);
    const auto& buckets = at->second;
    const CollectiveOp op = p.zero_stage == 0 ? CollectiveOp::AllReduce : CollectiveOp::ReduceScatter;
    auto& prices = data_prices(op, st);  // looked up once for the stage's thousands of buckets
    double comm = 0;
    // Most buckets are full ones of one size: each size looked up once per run of it.
    double size = -1, seconds = 0;
    for (const auto& bk : buckets) {
      if (bk.bytes != size) size = bk.bytes, seconds = data_collective(prices, op, bk.bytes, st);
      comm = std::max(comm, done[static_cast<std::size_t>(bk.ready_after_layer)]) + seconds;
    }
    return comm;
  }

  // When stage st's optimizer step (and ZeRO-1's parameter gather) ends.
  double stage_end(int st, const std::vector<double>& last, double embedding) {
    const auto i = static_cast<std::size_t>(st);
    Layers mine;
    std::vector<double> bwd;  // each layer's backward, in model order
    for (int j = st; j < chunks; j += P) {
      const auto& ls = layout.chunk_layers[static_cast<std::size_t>(j)];
      mine.insert(mine.end(), ls.begin(), ls.end());
      bwd.insert(bwd.end(), layer_bwd[static_cast<std::size_t>(j)].begin(), layer_bwd[static_cast<std::size_t>(j)].end());
    }
    const double comm = D > 1 ? gradient_sync(st, mine, bwd, last[i]) : 0;
    double start = std::max(comm, last[i]);
    if (st == 0 || st == P - 1) start = std::max(start, embedding);
    // Strategies with the same stages over the same parameters hold them alike: summed once.
    auto [at, fresh] = im.stage_params.try_emplace({im.param_set.at(&g), chunks, P, st}, 0.0);
    if (fresh) at->second = params_of(mine);
    const double params = at->second;
    const double shard = params / (p.zero_stage >= 1 ? D : 1);
    if (p.zero_stage == 1 && D > 1)  // ZeRO-1's term (strategies/units/zero.hpp)
      return strategies::zero1_stage_end(start, optimizer_seconds(shard),
                                         data_collective(CollectiveOp::AllGather, params * wbytes, st));
    return start + optimizer_seconds(shard);
  }

  double pipeline_step() {
    const double pipe = pipeline_time();
    // Each stage's last backward ends as the final micro-batch's gradient travels down to stage 0.
    std::vector<double> last(static_cast<std::size_t>(P), pipe);
    for (int st = 1; st < P; ++st)
      last[static_cast<std::size_t>(st)] =
          last[static_cast<std::size_t>(st - 1)] - B[static_cast<std::size_t>(st - 1)] - hop[static_cast<std::size_t>(st - 1)];
    const double embedding = embedding_sync(last);
    double step = 0;
    for (int st = 0; st < P; ++st) step = std::max(step, stage_end(st, last, embedding));
    return step;
  }
};

Result ClosedForm::estimate(const config::Scenario& s) {
  auto& im = *impl_;
  const auto& p = s.parallelism;
  const auto& t = s.training;
  Result r;
  r.scenario_spec = s;
  r.scenario = s.name;
  r.gpus = s.cluster.num_gpus();
  r.params = im.params;
  const models::ModelGraph& g = im.graph(s);
  auto laid = strategies::plan_layout(g, p, t, s.host);
  adopt_plan(r, std::move(laid.plan), s);

  Impl::Step step(im, s, g, laid.layout);
  step.price_passes();
  step.price_hops();
  step.stage_totals();
  const bool zero3 = p.zero_stage == 3 && step.D > 1;
  r.step_time_s = zero3 ? step.zero3_step() : step.pipeline_step();
  const double samples = static_cast<double>(t.global_batch) * r.plan.iterations_per_step;
  r.samples_per_s = samples / r.step_time_s;
  r.tokens_per_s = r.samples_per_s * static_cast<double>(s.model.tokens_per_sample());
  const double peak = s.device.peak_flops.at(im.dtype);
  r.model_tflops_per_gpu = r.model_flops / (r.step_time_s * r.gpus) / 1e12;
  r.mfu = r.model_flops / (r.step_time_s * r.gpus * peak);
  r.hfu = r.hardware_flops / (r.step_time_s * r.gpus * peak);
  if (s.faults.enabled) r.faults = faults::analyse_faults(s.faults, r.gpus, s.cluster.nodes, r.step_time_s, s.steps);
  r.capacity = capacity_plan(r);
  return r;
}

}  // namespace dtsim::results
