#include "strategies/works.hpp"

#include <algorithm>
#include <bit>
#include <iterator>

#include <fmt/format.h>

#include "strategies/tp_overlap.hpp"

namespace dtsim::strategies {

using taskgraph::CollectiveOp;
using taskgraph::InlineCollective;

namespace {
// FNV-1a over the fields that make two works the same (see WorkTable).
struct Hasher {
  std::uint64_t h = 1469598103934665603ull;
  void add(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  }
  void add(double v) { add(std::bit_cast<std::uint64_t>(v)); }
  void add(std::int64_t v) { add(static_cast<std::uint64_t>(v)); }
  void add(int v) { add(static_cast<std::uint64_t>(static_cast<std::int64_t>(v))); }
  void add(const std::string& s) {
    add(static_cast<std::uint64_t>(s.size()));
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ull;
    }
  }
};

std::uint64_t work_hash(const taskgraph::Work& w) {
  Hasher h;
  h.add(w.repeat);
  h.add(w.fixed_seconds);
  h.add(static_cast<std::uint64_t>(w.kernels.size()));
  for (const auto& k : w.kernels) {
    h.add(k.name);
    h.add(k.batch);
    h.add(k.m);
    h.add(k.n);
    h.add(k.k);
    h.add(k.bytes);
  }
  h.add(w.copy_bytes);
  h.add(w.copy_group);
  h.add(w.copy_together_group);
  h.add(static_cast<std::uint64_t>(w.comms.size()));
  for (const auto& c : w.comms) {
    h.add(static_cast<int>(c.op));
    h.add(c.group);
    h.add(c.bytes);
    h.add(c.count);
    h.add(c.hidden_by);
    h.add(c.hidden_share);
    h.add(static_cast<int>(c.cut));
    h.add(c.chunks);
    h.add(c.margin_sms);
    if (c.hidden_work >= 0) h.add(c.hidden_work);  // only then: other works keep their hashes
  }
  return h.h;
}

// Doubles compare by their bits: the text key this replaces told -0 from 0 apart too.
bool same_bits(double a, double b) { return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b); }

bool same_work(const taskgraph::Work& a, const taskgraph::Work& b) {
  if (!same_bits(a.repeat, b.repeat) || !same_bits(a.fixed_seconds, b.fixed_seconds) || !same_bits(a.copy_bytes, b.copy_bytes) ||
      a.copy_to_host != b.copy_to_host || a.copy_group != b.copy_group ||
      a.copy_together_group != b.copy_together_group ||
      a.kernels.size() != b.kernels.size() || a.comms.size() != b.comms.size())
    return false;
  for (std::size_t i = 0; i < a.kernels.size(); ++i) {
    const auto &x = a.kernels[i], &y = b.kernels[i];
    if (x.name != y.name || x.batch != y.batch || x.m != y.m || x.n != y.n || x.k != y.k || !same_bits(x.bytes, y.bytes))
      return false;
  }
  for (std::size_t i = 0; i < a.comms.size(); ++i) {
    const auto &x = a.comms[i], &y = b.comms[i];
    if (x.op != y.op || x.group != y.group || !same_bits(x.bytes, y.bytes) || !same_bits(x.count, y.count) ||
        x.hidden_by != y.hidden_by || !same_bits(x.hidden_share, y.hidden_share) || x.cut != y.cut || x.chunks != y.chunks ||
        x.margin_sms != y.margin_sms || x.hidden_work != y.hidden_work)
      return false;
  }
  return true;
}
}  // namespace

int WorkTable::get(taskgraph::Work w) {
  ++built_;
  auto& ids = ids_[work_hash(w)];
  for (int id : ids)
    if (same_work(g_.works[static_cast<std::size_t>(id)], w)) return id;
  ids.push_back(g_.add_work(std::move(w)));
  return ids.back();
}

double recompute_flops(const models::Layer& layer, Recompute r) {
  // Called for every layer of every candidate a sweep plans: the re-run kernels' FLOPs are summed
  // in place, in the order they run, and only op-level recomputation builds its reruns.
  double f = 0;
  if (layer.kind != models::LayerKind::Block || r == Recompute::None) return f;  // reruns() re-runs nothing
  const auto op_level = r == Recompute::Op ? reruns(layer, r) : std::vector<Rerun>{};
  for (std::size_t i = 0; i < layer.ops.size(); ++i) {
    const auto& op = layer.ops[i];
    if (!op.matmul) continue;
    const Rerun whole{reruns_op_whole(op, r), {}};
    for_each_rerun_kernel(op, r == Recompute::Op ? op_level[i] : whole, [&](const models::Kernel& k) { f += k.flops; });
  }
  return f;
}

double fp8_weight_params(const std::vector<const models::Layer*>& layers) {
  double n = 0;
  for (const auto* l : layers)
    for (const auto& op : l->ops)
      if (op.matmul && std::any_of(op.forward.begin(), op.forward.end(), [](const models::Kernel& k) { return k.fp8; }))
        n += op.params;
  return n;
}

models::Kernel fp8_weight_cast_kernel(double params, Fp8WeightCopies copies) {
  models::Kernel k;
  k.name = "fp8_weight_cast";
  k.kind = models::KernelKind::Memory;
  k.flops = params;  // amax over the weights
  // The bf16 weight read, its FP8 copy and transpose written; FP8 parameters (written by the
  // optimizer's own cast) only have their transpose rebuilt: read one byte, write one.
  k.bytes = (copies == Fp8WeightCopies::Fp8Params ? 2.0 : 4.0) * params;
  return k;
}

namespace {
// `gathers` all-gathers of the layer's sharded activation (under sequence parallelism only) and
// `sums` sums of its partial results: reduce-scatters under sequence parallelism, else all-reduces.
std::vector<InlineCollective> gathers_and_sums(const models::Layer& layer, const ParallelismSpec& p, int group, double gathers,
                                               double sums) {
  const bool sp = p.sequence_parallel;
  const double bytes = layer.tensor_split.bytes;
  std::vector<InlineCollective> out;
  if (sp && gathers > 0) out.push_back(InlineCollective{CollectiveOp::AllGather, group, bytes, gathers});
  if (sums > 0) out.push_back(InlineCollective{sp ? CollectiveOp::ReduceScatter : CollectiveOp::AllReduce, group, bytes, sums});
  return out;
}
}  // namespace

std::vector<InlineCollective> tensor_parallel_comms(const models::Layer& layer, bool forward, const ParallelismSpec& p, int group) {
  if (p.tensor <= 1) return {};
  const auto& split = layer.tensor_split;
  auto out = forward ? gathers_and_sums(layer, p, group, split.forward_gathers, split.forward_sums)
                     : gathers_and_sums(layer, p, group, split.backward_gathers, split.backward_sums);
  for (double bytes : forward ? split.channel_gathers : split.channel_sums)
    out.push_back(InlineCollective{forward ? CollectiveOp::AllGather : CollectiveOp::ReduceScatter, group, bytes, 1});
  return out;
}

// Full recomputation re-runs a block's forward, collectives included, before its backward.
// Op-level checkpointing keeps what the reduce-scatters return (torchtitan's save list names
// reduce_scatter_tensor) and runs the all-gathers (or all-reduces) again. Selective
// recomputation's checkpointed modules run their tensor-parallel pairs again (Layer::rerun_tp_pairs).
std::vector<InlineCollective> recompute_comms(const models::Layer& layer, Recompute r, const ParallelismSpec& p, int group) {
  if (layer.kind != models::LayerKind::Block) return {};
  if (r == Recompute::Selective && p.tensor > 1) return gathers_and_sums(layer, p, group, layer.rerun_tp_pairs, layer.rerun_tp_pairs);
  if (!checkpoints_block(r)) return {};
  auto again = tensor_parallel_comms(layer, true, p, group);
  if (r == Recompute::Op) std::erase_if(again, [](const InlineCollective& c) { return c.op == CollectiveOp::ReduceScatter; });
  return again;
}

std::vector<InlineCollective> context_parallel_comms(const models::Layer& layer, bool forward, const ParallelismSpec& p,
                                                     const ContextGroups& groups, int attention_kernel) {
  if (p.context <= 1 || layer.context_kv_bytes <= 0) return {};
  const double kv = layer.context_kv_bytes;
  const double c = p.context;
  if (p.context_all_gather) {
    // Llama 3: gather every rank's K and V before attention (the whole sequence's: c x kv),
    // exposed; backward gathers them again and reduce-scatters their gradients.
    if (forward) return {InlineCollective{CollectiveOp::AllGather, groups.all, c * kv, 1}};
    return {InlineCollective{CollectiveOp::AllGather, groups.all, c * kv, 1},
            InlineCollective{CollectiveOp::ReduceScatter, groups.all, c * kv, 1}};
  }
  // Ring: c - 1 steps, each passing one rank's K and V on (backward: with their gradients, twice
  // the bytes) while the attention of the chunk in hand runs, 1/c of the layer's attention.
  // Every rank sends at once on its own links; the pair that closes the ring is priced, the one
  // most likely to cross nodes.
  return {InlineCollective{CollectiveOp::SendRecv, groups.ring, forward ? kv : 2.0 * kv, c - 1.0, attention_kernel, 1.0 / c}};
}

namespace {
// Appends one pass of `op` to the work; returns where its first kernel landed when it is the
// attention context parallelism hides its exchange behind, else `attention` unchanged. A
// tensor-parallel linear's GEMMs go to `linears` (tp_overlap.hpp).
int append(taskgraph::Work& w, const models::Op& op, const std::vector<models::Kernel>& pass, int attention,
           std::vector<TpLinearAt>& linears) {
  const std::size_t at = w.kernels.size();
  if (op.context_attention && !pass.empty()) attention = static_cast<int>(at);
  w.kernels.insert(w.kernels.end(), pass.begin(), pass.end());
  if (auto l = find_tp_linear(op, &pass == &op.forward, w.kernels, at)) linears.push_back(*l);
  return attention;
}
}  // namespace

taskgraph::Work forward_work(const std::vector<const models::Layer*>& layers, const models::ModelGraph& /*g: as backward's*/,
                             const ParallelismSpec& p, int tp_group, const ContextGroups& cp) {
  taskgraph::Work w;
  w.name = layers.size() == 1 ? "fwd " + layers[0]->name : fmt::format("fwd {}..{}", layers.front()->name, layers.back()->name);
  for (const auto* l : layers) {
    int attention = -1;
    std::vector<TpLinearAt> linears;
    for (const auto& op : l->ops) attention = append(w, op, op.forward, attention, linears);
    auto c = overlap_tp_comms(tensor_parallel_comms(*l, true, p, tp_group), linears, p);
    w.comms.insert(w.comms.end(), c.begin(), c.end());
    auto x = context_parallel_comms(*l, true, p, cp, attention);
    w.comms.insert(w.comms.end(), x.begin(), x.end());
  }
  return w;
}

taskgraph::Work backward_work(const std::vector<const models::Layer*>& layers, const models::ModelGraph& g,
                              const ParallelismSpec& p, int tp_group, const ContextGroups& cp, const Checkpoints* ck) {
  const Checkpoints own = ck ? Checkpoints() : Checkpoints(p, {layers}, 1);
  if (!ck) ck = &own;
  taskgraph::Work w;
  w.name = layers.size() == 1 ? "bwd " + layers[0]->name : fmt::format("bwd {}..{}", layers.back()->name, layers.front()->name);
  for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
    const auto& l = **it;
    const Recompute r = ck->of(l);
    int reran = -1;
    std::vector<TpLinearAt> linears;
    const auto again = reruns(l, r);
    for (std::size_t i = 0; i < l.ops.size(); ++i) {
      if (again[i].whole) reran = append(w, l.ops[i], l.ops[i].forward, reran, linears);
      else if (again[i].any()) std::ranges::copy(rerun_kernels(l.ops[i], again[i]), std::back_inserter(w.kernels));
    }
    if (reran >= 0) {  // recomputing attention exchanges K and V again
      auto x = context_parallel_comms(l, true, p, cp, reran);
      w.comms.insert(w.comms.end(), x.begin(), x.end());
    }
    int attention = -1;
    for (auto op = l.ops.rbegin(); op != l.ops.rend(); ++op) attention = append(w, *op, op->backward, attention, linears);
    auto x = context_parallel_comms(l, false, p, cp, attention);
    w.comms.insert(w.comms.end(), x.begin(), x.end());
    if (!p.fused_grad_accumulation && l.params() > 0)
      w.kernels.push_back(models::grad_accumulate_kernel(l.params(), g.options.activation_bytes));
    auto tp = tensor_parallel_comms(l, false, p, tp_group);
    auto rerun_tp = recompute_comms(l, r, p, tp_group);
    tp.insert(tp.end(), rerun_tp.begin(), rerun_tp.end());
    auto c = overlap_tp_comms(std::move(tp), linears, p);
    w.comms.insert(w.comms.end(), c.begin(), c.end());
  }
  return w;
}

bool weight_gradient_kernel(const models::Kernel& k) {
  const std::string suffix = ".wgrad";
  const bool wgrad = k.name.size() >= suffix.size() && k.name.compare(k.name.size() - suffix.size(), suffix.size(), suffix) == 0;
  return wgrad || (k.kind == models::KernelKind::Conv && k.pass == models::ConvPass::Wgrad) || k.name == "embedding.scatter_add";
}

double weight_pass_bytes(const std::vector<const models::Layer*>& layers, int element_bytes) {
  double b = 0;
  for (const auto* l : layers)
    for (const auto& op : l->ops)
      for (const auto& k : op.backward)
        if (k.kind == models::KernelKind::Gemm && weight_gradient_kernel(k))  // m x n = k x m by k x n
          b += static_cast<double>(k.batch) * static_cast<double>(k.k) * static_cast<double>(k.m + k.n) * element_bytes;
  return b;
}

taskgraph::Work backward_part_work(const std::vector<const models::Layer*>& layers, const models::ModelGraph& g,
                                   const ParallelismSpec& p, int tp_group, bool weight, const Checkpoints* ck) {
  taskgraph::Work whole = backward_work(layers, g, p, tp_group, {}, ck);
  taskgraph::Work w;
  w.name = (weight ? "bwd weight " : "bwd input ") + whole.name.substr(4);
  std::vector<int> kept(whole.kernels.size(), -1);
  for (std::size_t i = 0; i < whole.kernels.size(); ++i) {
    auto& k = whole.kernels[i];
    const bool accumulate = k.name.rfind("grad_accumulate", 0) == 0;
    if ((weight_gradient_kernel(k) || accumulate) != weight) continue;
    kept[i] = static_cast<int>(w.kernels.size());
    w.kernels.push_back(std::move(k));
  }
  if (!weight) {
    w.comms = std::move(whole.comms);
    remap_tp_overlap(w.comms, kept);  // a collective beside a weight GEMM no longer has it
  }
  return w;
}

bool shared_experts_apart(const ParallelismSpec& p, const models::Layer& l) {
  return p.moe_shared_expert_overlap && p.moe_a2a_overlap == ParallelismSpec::MoeOverlap::None && l.experts.has_shared();
}

bool reruns_moe_module(const models::Layer& l, Recompute r, const ParallelismSpec& p) {
  return r == Recompute::Selective && l.experts.moe() && (p.recompute_modules & models::recompute_module::kMoe);
}

std::array<taskgraph::Work, 5> moe_pass_works(const models::Layer& l, bool forward, const models::ModelGraph& g,
                                             const ParallelismSpec& p, int tp_group, Recompute r, bool again,
                                             const ContextGroups& cp) {
  std::array<taskgraph::Work, 5> w;
  const auto& x = l.experts;
  const std::size_t first = x.first, last = x.last, n = l.ops.size();
  // The planner runs the MoE layer's forward again (all-to-alls included) before this backward.
  const bool module_apart = !forward && reruns_moe_module(l, r, p);
  const char* pass = again ? "rerun " : forward ? "fwd " : "bwd ";
  w[0].name = pass + l.name + (forward ? " before dispatch" : " before combine");
  w[1].name = pass + l.name + " experts";
  w[2].name = pass + l.name + (forward ? " after combine" : " after dispatch");
  w[3].name = pass + l.name + (forward ? " shared experts beside dispatch" : " shared experts beside combine");
  w[4].name = pass + l.name + (forward ? " shared experts beside combine" : " shared experts beside dispatch");
  // The piece an op after the experts runs in: the shared experts' own under the overlap.
  const bool apart = shared_experts_apart(p, l);
  auto after_piece = [&](std::size_t i) -> std::size_t {
    if (!apart || i < x.shared_first || i >= x.shared_last) return forward ? 2 : 0;
    return (i < x.shared_fc2) == forward ? 3 : 4;
  };
  auto add = [](taskgraph::Work& to, const std::vector<models::Kernel>& ks) { to.kernels.insert(to.kernels.end(), ks.begin(), ks.end()); };
  // The attention's piece (forward before the dispatch, backward after it), its linears and
  // where its attention kernel landed (for context parallelism's exchange).
  const std::size_t attention = forward ? 0 : 2;
  std::vector<TpLinearAt> linears;
  int attention_kernel = -1;
  auto add_op = [&](std::size_t piece, const models::Op& op, const std::vector<models::Kernel>& ks) {
    const std::size_t at = w[piece].kernels.size();
    add(w[piece], ks);
    if (piece != attention) return;
    if (op.context_attention && !ks.empty()) attention_kernel = static_cast<int>(at);
    if (auto lin = find_tp_linear(op, forward, w[piece].kernels, at)) linears.push_back(*lin);
  };
  if (forward) {
    const std::size_t from = again ? x.module : 0, to = again ? x.module_end() : n;
    for (std::size_t i = from; i < to; ++i) add_op(i < first ? 0 : i < last ? 1 : after_piece(i), l.ops[i], l.ops[i].forward);
  } else {
    // Full recomputation re-runs the whole forward, all-to-alls included: the planner emits it.
    const auto reran = reruns(l, r);
    for (std::size_t i = 0; i < n && r != Recompute::Full; ++i)
      if (reran[i].any() && !(module_apart && i >= x.module && i < x.module_end())) add(w[0], rerun_kernels(l.ops[i], reran[i]));
    for (std::size_t i = n; i-- > 0;) add_op(i >= last ? after_piece(i) : i >= first ? 1 : 2, l.ops[i], l.ops[i].backward);
    if (!p.fused_grad_accumulation && l.params() > 0)
      w[2].kernels.push_back(models::grad_accumulate_kernel(l.params(), g.options.activation_bytes));
  }
  auto comms = again ? recompute_comms(l, r, p, tp_group) : tensor_parallel_comms(l, forward, p, tp_group);
  if (!forward && r != Recompute::Full && !module_apart) {  // a re-run the planner emits has its own
    auto again = recompute_comms(l, r, p, tp_group);
    comms.insert(comms.end(), again.begin(), again.end());
  }
  // Under tensor-parallel overlap the attention's collectives run beside its own GEMMs, in its
  // piece; the rest (the experts' under expert tensor parallelism) stay after the combine.
  for (auto& c : overlap_tp_comms(std::move(comms), linears, p)) w[c.cut == taskgraph::OverlapCut::None ? 2 : attention].comms.push_back(c);
  // Context parallelism's K/V exchange beside the attention, in its piece.
  if (attention_kernel >= 0)
    for (auto& c : context_parallel_comms(l, forward, p, cp, attention_kernel)) w[attention].comms.push_back(c);
  return w;
}

}  // namespace dtsim::strategies
