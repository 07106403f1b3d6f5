#include <algorithm>
#include <stdexcept>

#include "sim/cost/roofline.hpp"
#include "sim/results/closed_form_impl.hpp"
#include "strategies/buckets.hpp"
#include "strategies/placement.hpp"
#include "strategies/settings.hpp"
#include "strategies/unit.hpp"
#include "strategies/update_kernels.hpp"
#include "strategies/units/zero.hpp"

// One strategy's step in closed form (closed_form.hpp): each chunk's passes and the hops between
// chunks, then the pipeline (or ZeRO-3's one stage), and each stage's gradient sync and
// optimizer step.
namespace dtsim::results {

using closed_form_detail::params_of;
using strategies::Recompute;
using taskgraph::CollectiveOp;
using Layers = closed_form_detail::Layers;

void ClosedForm::Impl::Step::price_passes() {
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
void ClosedForm::Impl::Step::price_hops() {
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
void ClosedForm::Impl::Step::stage_totals() {
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

// Stage st's data-parallel collectives of `op` (all tensor ranks' groups at once), by size.
// Stage st's groups are stage 0's moved by st stages' GPUs (T under tp-pp-dp, T x D under
// tp-dp-pp): stages whose moves differ by whole nodes hold groups of one shape (GroupPrices prices
// them alike), so they are keyed by where the move leaves them in the node.
ClosedForm::Impl::BySize& ClosedForm::Impl::Step::data_prices(CollectiveOp op, int st) {
  const std::int64_t gpn = s.cluster.gpus_per_node;
  const std::int64_t move = static_cast<std::int64_t>(p.pipeline_outer ? T * D : T) * st;
  const double where = static_cast<double>(move % gpn);
  return im.data_prices[{static_cast<double>(op) * 256 + static_cast<double>(p.algorithm), where, static_cast<double>(T),
                         static_cast<double>(P), static_cast<double>(D), p.pipeline_outer ? 1.0 : 0.0}];
}
double ClosedForm::Impl::Step::data_collective(Impl::BySize& prices, CollectiveOp op, double bytes, int st) {
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

double ClosedForm::Impl::Step::optimizer_seconds(double shard) const {
  double seconds = 0;
  for (const auto& k : strategies::update_kernels(p, t, shard)) seconds += cost::quote_kernel(s.device, k, im.dtype).seconds;
  return seconds;
}

// One stage, every layer's parameters gathered before its forward and backward: ZeRO-3's term
// (strategies/units/zero.hpp) over these prices.
double ClosedForm::Impl::Step::zero3_step() {
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
double ClosedForm::Impl::Step::hybrid_collective(CollectiveOp op, double bytes) {
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

// The passes of every micro-batch through the pipeline, up to the last backward on stage 0: the
// schedule's own term (strategies/schedules/).
double ClosedForm::Impl::Step::pipeline_time() const {
  if (!p.schedule->closed_form) throw std::logic_error("the pipeline schedule has no closed form (closed_form_gap)");
  return p.schedule->closed_form({.stages = P, .micro_batches = m, .F = F, .B = B, .f = f, .b = b, .sum = sum, .worst = worst,
                                  .worst_f = worst_f, .worst_b = worst_b, .hops = hops});
}

// Tied embeddings on different stages: the first and last stage sum the table's gradients.
double ClosedForm::Impl::Step::embedding_sync(const std::vector<double>& last) {
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
double ClosedForm::Impl::Step::gradient_sync(int st, const Layers& mine, const std::vector<double>& bwd, double last) {
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
  auto [at, made] = im.buckets.try_emplace({param_set, chunks, P, st, gbytes, p.bucket_bytes, p.first_bucket_bytes});
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
double ClosedForm::Impl::Step::stage_end(int st, const std::vector<double>& last, double embedding) {
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
  auto [at, fresh] = im.stage_params.try_emplace({param_set, chunks, P, st}, 0.0);
  if (fresh) at->second = params_of(mine);
  const double params = at->second;
  const double shard = params / (p.zero_stage >= 1 ? D : 1);
  if (p.zero_stage == 1 && D > 1 && !p.overlap_param_gather)  // ZeRO-1's term (strategies/units/zero.hpp)
    return strategies::zero1_stage_end(start, optimizer_seconds(shard),
                                       data_collective(CollectiveOp::AllGather, params * wbytes, st));
  return start + optimizer_seconds(shard);
}

// Megatron-Core's overlapped parameter gather: how late the pipeline ends. Each stage's gathers
// start with the step and its first chunk's first forward waits for them layer by layer
// (strategies/units/zero.hpp, overlapped_gather_delay); stage st's input arrives only after the
// chunks before it have run forward and sent, so that head start hides part of its delay. The
// step is late by the largest delay left (the later chunks' gathers queue behind and are done
// long before their first forwards).
double ClosedForm::Impl::Step::param_gather_delay() {
  if (!p.overlap_param_gather || p.zero_stage != 1 || D <= 1) return 0;
  double delay = 0, head = 0;
  for (int st = 0; st < P && st < chunks; ++st) {
    const auto j = static_cast<std::size_t>(st);
    auto& gathers = data_prices(CollectiveOp::AllGather, st);
    std::vector<double> gather, forward;
    for (const auto* l : layout.chunk_layers[j]) {
      gather.push_back(l->params() > 0 ? data_collective(gathers, CollectiveOp::AllGather, l->params() * wbytes, st) : 0.0);
      forward.push_back(im.layer_seconds(*l, true, g, p, layout.checkpoints, rep(st)));
    }
    delay = std::max(delay, strategies::overlapped_gather_delay(gather, forward) - head);
    head += F[j] + (j < hop.size() ? hop[j] : 0.0);
  }
  return delay;
}

double ClosedForm::Impl::Step::pipeline_step() {
  const double pipe = pipeline_time() + param_gather_delay();
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

}  // namespace dtsim::results
