#include "strategies/units/zero3_trace.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "strategies/units/units.hpp"

namespace dtsim::strategies::zero3 {

// Layer li's items in one direction, in the order they run, each with the gather it waits for
// (-1: none), following the parameter trace from `cursor` on. `early` receives the gathers a
// recompute without gathers of its own needs before it starts (its backward's).
std::vector<Item> layer_items(const models::Layer& l, int li, bool forward, const FrameworkSpec& f, Recompute r,
                              const std::vector<ParamUse>& uses, const std::vector<int>& wait, std::size_t& cursor,
                              std::vector<int>& early) {
  const int m = static_cast<int>(l.ops.size());
  std::vector<Item> items;
  if (forward) {
    for (int k = 0; k < m; ++k) items.push_back({k, false});
  } else {
    const auto again = reruns(l, r);
    for (int k = 0; k < m; ++k)
      if (again[static_cast<std::size_t>(k)].any()) items.push_back({k, true});
    for (int k = m - 1; k >= 0; --k) items.push_back({k, false});
  }
  auto use_at = [&](int op_index) {
    if (cursor >= uses.size() || uses[cursor].layer != li || uses[cursor].op != op_index)
      throw std::logic_error("ZeRO-3 parameter trace out of step with the passes");
    return wait[cursor++];
  };
  early.clear();
  if (f.gather_per_layer) {
    if (l.params() > 0 && !items.empty()) items.front().wait = use_at(-1);
    return items;
  }
  const bool regather = checkpoints_block(r) && f.regather_for_recompute;
  for (auto& it : items) {
    const double p = l.ops[static_cast<std::size_t>(it.op)].params;
    if (p > 0 && (!it.rerun || regather)) it.wait = use_at(it.op);
  }
  // Without the recompute's own gathers its backward's gathers are needed first.
  if (!items.empty() && items.front().rerun && !regather) {
    for (auto& it : items)
      if (it.wait >= 0) early.push_back(std::exchange(it.wait, -1));
    if (!early.empty()) items.front().wait = early.front();
  }
  return items;
}

// FSDP2 under expert parallelism, as torchtitan applies it (pytorch/torchtitan at f64bbad4,
// torchtitan/models/llama4/infra/parallelize.py apply_fsdp, lines 295-475; at b5bcd76c the same
// split in torchtitan/distributed/fsdp.py apply_fsdp_to_decoder, lines 268-360): a block's routed
// experts are sharded over the "dp_shard_mod_ep" ("efsdp") mesh, the GPUs holding the same experts
// (dtsim's expert-data-parallel group), everything else over the whole data-parallel mesh. So a
// block's gather is two all-gathers, the dense part's over the data-parallel group, then the
// experts' over the expert-data-parallel one (none when that is one GPU), issued together
// (set_modules_to_forward_prefetch([next_block, next_block.moe.experts]), the same for backward),
// and its post-backward two reduce-scatters: the experts' unit first (its backward ends inside
// the block's), then the block's.
// The elements of a block's gather or reduce-scatter that go over the expert-data-parallel group.
double expert_part(const ParallelismSpec& p, const models::Layer& l) {
  if (!framework_hands_moe_layers(p) || p.expert_data() <= 1 || l.kind != models::LayerKind::Block) return 0;
  return l.expert_params();
}

// A layer the experts unit runs (its all-to-alls and pieces) rather than one of our segments.
bool handed(const ParallelismSpec& p, const models::Layer& l) { return framework_hands_moe_layers(p) && l.experts.moe(); }

// Segments start at each item that waits; each is one compute task.
std::vector<std::size_t> segment_starts(const std::vector<Item>& items) {
  std::vector<std::size_t> starts{0};
  for (std::size_t i = 1; i < items.size(); ++i)
    if (items[i].wait >= 0) starts.push_back(i);
  return starts;
}
// The trace of one micro-batch on one chunk, read once.
Trace::Trace(const Layers& layers, const FrameworkSpec& f, const Checkpoints& ck) : uses(param_uses(layers, f, ck)) {
  gathers = zero3_gathers(layers, f, ck, &wait);
  forward_uses = static_cast<std::size_t>(std::count_if(uses.begin(), uses.end(), [](const ParamUse& u) { return !u.backward; }));
  for (std::size_t g = 0; g < gathers.size(); ++g)
    if (g == 0 || gathers[g].burst != gathers[g - 1].burst) burst_first.push_back(static_cast<int>(g));
  burst_first.push_back(static_cast<int>(gathers.size()));
}

// Compute tasks one micro-batch's forward and backward of `layers` take (the MoE layers handed to
// the experts unit count there).
double segments_per_micro_batch(const Layers& layers, const ParallelismSpec& p, const Checkpoints& ck) {
  const FrameworkSpec& f = p.framework;
  const Trace trace(layers, f, ck);
  const int n = static_cast<int>(layers.size());
  double segments = 0;
  std::vector<int> early;
  for (const bool forward : {true, false}) {
    std::size_t cursor = forward ? 0 : trace.forward_uses;
    for (int step = 0; step < n; ++step) {
      const int li = forward ? step : n - 1 - step;
      const auto& l = *layers[static_cast<std::size_t>(li)];
      const auto items = layer_items(l, li, forward, f, ck.of(l), trace.uses, trace.wait, cursor, early);
      if (!handed(p, l)) segments += static_cast<double>(segment_starts(items).size());
    }
  }
  return segments;
}
Collectives micro_batch_collectives(const Layers& layers, const ParallelismSpec& p, const Checkpoints& ck) {
  Collectives c;
  const auto gathers = Trace(layers, p.framework, ck).gathers;
  c.gathers = static_cast<double>(gathers.size());
  c.reduces = static_cast<double>(zero3_reduce_buckets(layers, p.framework).size());
  for (const auto& g : gathers)
    if (expert_part(p, *layers[static_cast<std::size_t>(g.layer)]) > 0) ++c.expert_gathers;
  for (const auto* l : layers)
    if (expert_part(p, *l) > 0) ++c.expert_reduces;
  return c;
}

}  // namespace dtsim::strategies::zero3
