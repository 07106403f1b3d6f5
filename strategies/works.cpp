#include "strategies/works.hpp"

#include <fmt/format.h>

namespace dtsim::strategies {

using taskgraph::CollectiveOp;
using taskgraph::InlineCollective;

int WorkTable::get(taskgraph::Work w) {
  std::string key = fmt::format("{}|{}|", w.repeat, w.fixed_seconds);
  for (const auto& k : w.kernels) key += fmt::format("{}:{},{},{},{},{};", k.name, k.batch, k.m, k.n, k.k, k.bytes);
  for (const auto& c : w.comms) key += fmt::format("c{},{},{},{};", static_cast<int>(c.op), c.group, c.bytes, c.count);
  auto [it, fresh] = ids_.try_emplace(key, -1);
  if (fresh) it->second = g_.add_work(std::move(w));
  return it->second;
}

namespace {
bool rerun(const models::Layer& l, const models::Op& op, Recompute r) {
  return l.kind == models::LayerKind::Block &&
         (r == Recompute::Full || r == Recompute::Stage || (r == Recompute::Selective && op.selective));
}
}  // namespace

double recompute_flops(const models::Layer& layer, Recompute r) {
  double f = 0;
  for (const auto& op : layer.ops)
    if (op.matmul && rerun(layer, op, r))
      for (const auto& k : op.forward) f += k.flops;
  return f;
}

std::vector<InlineCollective> tensor_parallel_comms(const models::Layer& layer, bool forward, const models::ModelGraph& g,
                                                    const ParallelismSpec& p, int group) {
  if (p.tensor <= 1) return {};
  const auto& split = layer.tensor_split;
  const bool sp = p.sequence_parallel;
  auto c = [&](CollectiveOp op, double n) { return InlineCollective{op, group, split.bytes, n}; };
  const double sums = forward ? split.forward_sums : split.backward_sums;
  const double gathers = forward ? split.forward_gathers : split.backward_gathers;
  std::vector<InlineCollective> out;
  if (sp && gathers > 0) out.push_back(c(CollectiveOp::AllGather, gathers));
  if (sums > 0) out.push_back(c(sp ? CollectiveOp::ReduceScatter : CollectiveOp::AllReduce, sums));
  // Full recomputation re-runs a block's forward, collectives included, before its backward.
  if (!forward && (p.recompute == Recompute::Full || p.recompute == Recompute::Stage) && layer.kind == models::LayerKind::Block) {
    auto again = tensor_parallel_comms(layer, true, g, p, group);
    out.insert(out.end(), again.begin(), again.end());
  }
  return out;
}

taskgraph::Work forward_work(const std::vector<const models::Layer*>& layers, const models::ModelGraph& g,
                             const ParallelismSpec& p, int tp_group) {
  taskgraph::Work w;
  w.name = layers.size() == 1 ? "fwd " + layers[0]->name : fmt::format("fwd {}..{}", layers.front()->name, layers.back()->name);
  for (const auto* l : layers) {
    for (const auto& op : l->ops) w.kernels.insert(w.kernels.end(), op.forward.begin(), op.forward.end());
    auto c = tensor_parallel_comms(*l, true, g, p, tp_group);
    w.comms.insert(w.comms.end(), c.begin(), c.end());
  }
  return w;
}

taskgraph::Work backward_work(const std::vector<const models::Layer*>& layers, const models::ModelGraph& g,
                              const ParallelismSpec& p, int tp_group) {
  taskgraph::Work w;
  w.name = layers.size() == 1 ? "bwd " + layers[0]->name : fmt::format("bwd {}..{}", layers.back()->name, layers.front()->name);
  for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
    const auto& l = **it;
    for (const auto& op : l.ops)
      if (rerun(l, op, p.recompute)) w.kernels.insert(w.kernels.end(), op.forward.begin(), op.forward.end());
    for (auto op = l.ops.rbegin(); op != l.ops.rend(); ++op)
      w.kernels.insert(w.kernels.end(), op->backward.begin(), op->backward.end());
    if (!p.fused_grad_accumulation && l.params() > 0)
      w.kernels.push_back(models::grad_accumulate_kernel(l.params(), g.options.activation_bytes));
    auto c = tensor_parallel_comms(l, false, g, p, tp_group);
    w.comms.insert(w.comms.end(), c.begin(), c.end());
  }
  return w;
}

}  // namespace dtsim::strategies
