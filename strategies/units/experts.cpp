// Expert parallelism's passes (Megatron-Core's layout): each MoE layer dispatches its tokens to
// the GPUs holding their experts and combines the results by all-to-all over the expert-parallel
// group, forward and backward; expert gradients are summed over the data / expert GPUs holding
// the same experts. The groups, and the collectives over a layer's dense and expert parameters
// that ZeRO uses, are the emitter's (plan_experts.cpp).
#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <random>
#include <tuple>

#include "strategies/planner.hpp"
#include "strategies/settings.hpp"
#include "strategies/units/units.hpp"

namespace dtsim::strategies {

// How many times its even share of the tokens the most loaded GPU of an expert-parallel group
// gets in this layer. Each expert's share is 1 + skew x z (z standard normal, Box-Muller on
// std::mt19937_64, whose output the standard fixes, so every platform draws the same), at least
// 0, normalised to a mean of 1; a GPU's load is the mean of its experts'. With a capacity factor
// every expert computes its padded capacity whatever it gets (the excess is dropped), so no GPU
// is slower than another.
double slowest_expert_load(const ParallelismSpec& p, const models::ModelGraph& g, const models::Layer& l) {
  if (p.expert_skew <= 0 || p.expert <= 1 || l.experts.capacity > 0) return 1.0;
  const auto index = static_cast<std::uint64_t>(&l - g.layers.data());
  std::mt19937_64 rng(p.expert_seed * 0x9E3779B97F4A7C15ull + index);
  auto uniform = [&] { return (static_cast<double>(rng() >> 11) + 0.5) * 0x1.0p-53; };
  const std::int64_t experts = l.experts.local_experts * p.expert;
  std::vector<double> share(static_cast<std::size_t>(experts));
  double sum = 0;
  for (auto& w : share) {
    const double z = std::sqrt(-2.0 * std::log(uniform())) * std::cos(2.0 * M_PI * uniform());
    w = std::max(0.0, 1.0 + p.expert_skew * z);
    sum += w;
  }
  if (sum <= 0) return 1.0;
  double worst = 0;
  for (int r = 0; r < p.expert; ++r) {
    double load = 0;
    for (std::int64_t i = 0; i < l.experts.local_experts; ++i) load += share[static_cast<std::size_t>(r * l.experts.local_experts + i)];
    worst = std::max(worst, load / static_cast<double>(l.experts.local_experts) / (sum / static_cast<double>(experts)));
  }
  return worst;
}

// SMs the all-to-all kernels hold while the paired computation runs: NCCL's all-to-all under
// Megatron-Core's overlap (16 on DGX-class H100/H800 with 8 NICs: microbench comm_interference.json
// comm-001, comm-012), DeepEP's kernels, as DualPipe runs them and as the DeepEP dispatcher does
// (20: "only 20 SMs are sufficient to fully utilize the bandwidths of IB and NVLink", DeepSeek-V3
// report, arXiv:2412.19437, Sec. 3.2.2).
constexpr int kNcclAllToAllSms = 16, kDeepEpSms = 20;

taskgraph::InlineCollective overlapped_all_to_all(const ParallelismSpec& p, int group, double bytes, int hidden_work) {
  taskgraph::InlineCollective c{CollectiveOp::AllToAll, group, bytes, 1.0};
  if (hidden_work < 0) return c;  // beside nothing: priced alone, all exposed
  c.hidden_work = hidden_work;  // slowing it while in flight (results::inline_cost)
  const bool deepep = p.moe_a2a_overlap == ParallelismSpec::MoeOverlap::DualPipe ||
                      p.moe_dispatcher == ParallelismSpec::MoeDispatcher::DeepEp;
  c.margin_sms = deepep ? kDeepEpSms : kNcclAllToAllSms;
  return c;
}

// The chance that a token's top-k of `experts` routed experts, spread evenly over `parts` (GPUs
// or nodes), include one of a given part's: 1 - C(experts - experts/parts, k) / C(experts, k).
double reaches(double experts, double k, double parts) {
  double none = 1.0;
  const double others = experts - experts / parts;
  for (int i = 0; i < static_cast<int>(k); ++i) none *= std::max(0.0, others - i) / (experts - i);
  return 1.0 - none;
}

// One GPU's bytes for layer l's dispatch all-to-all over an expert-parallel group of `gpus` GPUs
// on `nodes` nodes (its combine moves as many back). NCCL's (Megatron-Core's alltoall dispatcher)
// carries a row per token and expert: tokens x k x hidden. DeepEP's normal kernels send a token
// once to each GPU holding one of its experts, and across nodes once over RDMA to each such node,
// to the GPU of the same local index, which forwards it over NVLink (DeepEP README; DeepSeek-V3
// report Sec. 3.2.2). Priced as a direct all-to-all whose every pair carries tokens x hidden x the
// chance that the token needs the receiver's GPU (one node) or node (several: so each NIC carries
// DeepEP's RDMA bytes; the forwarding inside the node is not priced).
// Node-limited routing (p.moe_node_limit = M of N nodes) picks M nodes, then the token's experts
// among their M E / N: a given node is needed with chance M / N times reaches(M E / N, k, M).
double moe_dispatch_bytes(const ParallelismSpec& p, const models::Layer& l, int gpus, int nodes) {
  const double rows = l.experts.dispatch_bytes;
  if (p.moe_dispatcher != ParallelismSpec::MoeDispatcher::DeepEp) return rows;
  const double experts = static_cast<double>(l.experts.local_experts) * gpus;
  const double k = std::round(l.experts.active_share * experts);
  const double tokens = rows / k;  // tokens x hidden x bytes
  if (nodes <= 1) return tokens * gpus * reaches(experts, k, gpus);
  const double n = nodes, m = p.moe_node_limit > 0 ? std::min<double>(p.moe_node_limit, n) : n;
  const double within = m * experts / n;  // the experts of the nodes a token may use
  return tokens * n * (m / n) * reaches(within, std::min(k, within), m);
}

// FP8 toward the experts: one byte an element and a scale per 32 elements' worth (DeepSeek-V3's
// fp32 scale per 1x128 tile, arXiv:2412.19437 Sec. 3.3.2, "we quantize the activation before MoE
// up-projections into FP8 and then apply dispatch components ... A similar strategy is applied to
// the activation gradient before MoE down-projections"; MXFP8's E8M0 byte per 32), against the
// activations' bytes.
double fp8_dispatch_share(Precision precision) { return (1.0 + 1.0 / 32.0) / activation_bytes(precision); }

// Which passes of a stage's schedule run beside another: each forward next to a backward of
// another micro-batch or chunk (the one it does not depend on), taken in schedule order; the
// warm-up forwards and the cool-down backwards run alone (Megatron-Core adds one warm-up forward
// so that paired passes are independent, schedules.py get_pp_rank_microbatches).
std::vector<bool> paired_passes(const std::vector<PipeOp>& ops) {
  std::vector<bool> out(ops.size(), false);
  for (std::size_t i = 0; i + 1 < ops.size(); ++i) {
    const PipeOp &a = ops[i], &b = ops[i + 1];
    if (out[i] || a.forward == b.forward || a.part == PipeOp::Part::Weight || b.part == PipeOp::Part::Weight) continue;
    if (a.micro_batch == b.micro_batch && a.chunk == b.chunk) continue;
    out[i] = out[i + 1] = true;
  }
  return out;
}

namespace {

bool slower(double load) { return load > 1.0 + 1e-9; }

// How an MoE layer's all-to-alls run: tasks on the network (no overlap), or inline on the pieces
// before them, alone or beside the paired pass's computation (taskgraph::InlineCollective).
enum class Inline : std::uint8_t { None, Alone, Paired };

class Experts final : public Unit {
 public:
  explicit Experts(const ParallelismSpec&) {}
  const char* name() const override { return "experts"; }

  bool splits(const PassKind&) const override { return true; }  // MoE layers stop at their all-to-alls
  bool takes_layers() const override { return true; }
  int emit_layer(Planner& em, Pass& pass, const models::Layer& l, std::vector<int> deps) override {
    return layer_pass(em, pass.stage, pass.chunk, pass.kind.forward, l, std::move(deps), pass.tag, mode(em, pass));
  }
  void after_gradient_sync(Planner& em, int s) override;

  double tasks(const Count& c) const override;
  CollectiveCounts collectives(const Count& c) const override;
  std::string replay_only(const ParallelismSpec&) const override { return "expert parallelism"; }

 private:
  struct Passes {
    double computes = 0, all_to_alls = 0;
  };
  Passes passes(const Count& c) const;
  static double buckets(const Count& c);
  int layer_pass(Planner& em, int s, int chunk, bool forward, const models::Layer& l, std::vector<int> deps, const std::string& tag,
                 Inline mode);
  int pieces(Planner& em, int s, bool forward, const models::Layer& l, const std::array<int, 6>& w, std::vector<int> deps,
             const std::string& what, const std::string& tag, Inline mode);
  int all_to_all(Planner& em, int s, const models::Layer& l, std::vector<int> after, const std::string& label, bool toward);
  double bytes(Planner& em, int group, const models::Layer& l, bool toward);
  const std::array<int, 6>& works(Planner& em, int s, bool forward, const models::Layer& l, Inline mode, bool again = false);
  Inline mode(Planner& em, const Pass& pass);

  // Per (forward, layer, tensor group, all-to-alls) an MoE layer's works as moe_pass_works cuts
  // them (before the dispatch, the experts, after the combine, the shared experts beside the first
  // and the second all-to-all: -1 where not apart), then the experts at the most loaded GPU's load
  // (-1: none slower);
  // per stage the last expert task of that GPU, and which passes of its schedule are paired. The
  // last key: the MoE layer's forward run again before backward (the moe recompute module).
  std::map<std::tuple<bool, const models::Layer*, int, Inline, bool>, std::array<int, 6>> moe_works_;
  std::map<int, int> last_slow_;
  std::map<int, int> group_nodes_;  // per expert-parallel group: the nodes it spans
  std::map<int, std::vector<bool>> paired_;
};

// A pass's forward A2A #1 (dispatch) and #2 (combine), and backward #1 (combine's gradient) and #2
// (dispatch's), each beside the piece of the paired pass that Megatron-Core's combined 1F1B layer
// runs beside it (model_chunk_schedule_plan.py, TransformerLayerSchedulePlan.run: "comm_stream:
// combine_bwd | dispatch_fwd->dispatch_bwd | combine_fwd; comp_stream: pre_dispatch_fwd |
// mlp_bwd->mlp_bwd_dw->mlp_fwd | pre_dispatch_bwd"): forward dispatch beside the backward's
// experts, forward combine beside the backward's part before the dispatch, backward combine beside
// the forward's part before the dispatch, backward dispatch beside the forward's experts. Indices
// into the other direction's works (moe_pass_works: backward's are after the combine, experts,
// before the dispatch, in the order backward runs them).
constexpr std::array<std::size_t, 2> kForwardHiddenBy{1, 2}, kBackwardHiddenBy{0, 1};

Inline Experts::mode(Planner& em, const Pass& pass) {
  if (em.spec().moe_a2a_overlap == ParallelismSpec::MoeOverlap::None) return Inline::None;
  auto [it, fresh] = paired_.try_emplace(pass.stage);
  const auto& ops = em.stage_ops(pass.stage);
  if (fresh) it->second = paired_passes(ops);
  if (!pass.op || ops.empty()) return Inline::Alone;
  const auto index = static_cast<std::size_t>(pass.op - ops.data());
  return index < it->second.size() && it->second[index] ? Inline::Paired : Inline::Alone;
}

const std::array<int, 6>& Experts::works(Planner& em, int s, bool forward, const models::Layer& l, Inline mode, bool again) {
  const int tpg = em.tensor_group(s);
  auto [it, fresh] = moe_works_.try_emplace({forward, &l, tpg, mode, again}, std::array<int, 6>{-1, -1, -1, -1, -1, -1});
  if (!fresh) return it->second;
  auto w = moe_pass_works(l, forward, em.model(), em.spec(), tpg, em.shape().checkpoints.of(l), again, em.context_groups(s));
  if (mode != Inline::None) {  // the two all-to-alls ride on the pieces before them
    const int group = em.expert_groups(s).front();  // holds the stage's first GPU, where its tasks run
    std::array<int, 6> other{-1, -1, -1, -1, -1, -1};
    if (mode == Inline::Paired) other = works(em, s, !forward, l, Inline::None);
    for (std::size_t a = 0; a < 2; ++a)  // the first toward the experts, the second back
      w[a].comms.push_back(overlapped_all_to_all(em.spec(), group, bytes(em, group, l, a == 0),
                                                 mode == Inline::Paired ? other[(forward ? kForwardHiddenBy : kBackwardHiddenBy)[a]] : -1));
  }
  const double load = slowest_expert_load(em.spec(), em.model(), l);
  if (slower(load)) {
    taskgraph::Work slow = w[1];
    slow.name += " (most loaded GPU)";
    for (auto& k : slow.kernels) k = models::scale_expert_tokens(k, load);
    it->second[5] = em.works().get(std::move(slow));
  }
  for (std::size_t i = 0; i < 3; ++i) it->second[i] = em.works().get(std::move(w[i]));
  for (std::size_t i = 3; i < 5; ++i)  // the shared experts apart, under their overlap
    if (!w[i].kernels.empty()) it->second[i] = em.works().get(std::move(w[i]));
  return it->second;
}

// Layer l's dispatch bytes on one GPU of expert-parallel group `group`: NCCL's rows, or DeepEP's
// by the group's size and the nodes it spans (counted once per group); toward the experts in FP8
// where the scenario says so.
double Experts::bytes(Planner& em, int group, const models::Layer& l, bool toward) {
  const double wire = toward && em.spec().moe_fp8_dispatch ? fp8_dispatch_share(em.training().precision) : 1.0;
  if (em.spec().moe_dispatcher != ParallelismSpec::MoeDispatcher::DeepEp) return l.experts.dispatch_bytes * wire;
  const auto& gpus = em.plan().graph.groups[static_cast<std::size_t>(group)];
  auto [it, fresh] = group_nodes_.try_emplace(group, 0);
  if (fresh) {
    const int per_node = std::max(1, em.spec().gpus_per_node);
    std::vector<int> nodes;
    for (int g : gpus)
      if (std::find(nodes.begin(), nodes.end(), g / per_node) == nodes.end()) nodes.push_back(g / per_node);
    it->second = static_cast<int>(nodes.size());
  }
  return moe_dispatch_bytes(em.spec(), l, static_cast<int>(gpus.size()), it->second) * wire;
}

// The all-to-alls name every expert-parallel group of the stage, so all their flows share the
// network; with every replica emitted, the replicas of one group join its all-to-all.
int Experts::all_to_all(Planner& em, int s, const models::Layer& l, std::vector<int> after, const std::string& label, bool toward) {
  const auto& p = em.spec();
  const bool every = em.replicas_join();
  std::vector<int> groups = em.expert_groups(s);
  if (every) {
    const int per_t = p.data / p.expert, block = em.replica() / p.expert;
    std::vector<int> mine;
    for (int t = 0; t < p.tensor; ++t) mine.push_back(groups[static_cast<std::size_t>(t * per_t + block)]);
    groups = std::move(mine);
  }
  const double moved = bytes(em, groups.front(), l, toward);
  return em.group_collective(s, {CollectiveOp::AllToAll, taskgraph::Algorithm::Direct, std::move(groups), moved},
                             std::move(after), label, every ? 1 + em.replica() / p.expert : 0);
}

// One layer's pass on stage s. An MoE layer runs as its part before the dispatch, the dispatch
// all-to-all, its experts, the combine all-to-all and its part after (in backward the same,
// mirrored). When the router's skew gives another GPU of the group more tokens than this one, that
// GPU's expert work runs too, at its load, and the combine waits for it: the slowest expert GPU
// sets the pace, and what this GPU waits is straggler wait.
int Experts::layer_pass(Planner& em, int s, int chunk, bool forward, const models::Layer& l, std::vector<int> deps,
                        const std::string& tag, Inline mode) {
  const std::string what = (forward ? "fwd " : "bwd ") + l.name + tag;
  if (!l.experts.moe()) return em.compute(s, em.pass_work(forward, chunk, &l, em.tensor_group(s)), std::move(deps), what);
  const auto w = works(em, s, forward, l, mode);
  const Recompute r = em.shape().checkpoints.of(l);
  if (!forward && r == Recompute::Full) {  // the forward again, all-to-alls included (beside nothing)
    const int again = layer_pass(em, s, chunk, true, l, std::move(deps), tag + " recompute", mode == Inline::None ? mode : Inline::Alone);
    deps = {again};
  } else if (!forward && reruns_moe_module(l, r, em.spec())) {  // the MoE layer's forward again (refused beside the overlap)
    const std::string again = tag + " recompute";
    deps = {pieces(em, s, true, l, works(em, s, true, l, Inline::None, true), std::move(deps), "fwd " + l.name + again, again, Inline::None)};
  }
  return pieces(em, s, forward, l, w, std::move(deps), what, tag, mode);
}

// The pieces of one MoE layer pass (works' `w`) and its all-to-alls, after `deps`.
int Experts::pieces(Planner& em, int s, bool forward, const models::Layer& l, const std::array<int, 6>& w, std::vector<int> deps,
                    const std::string& what, const std::string& tag, Inline mode) {
  const int before = em.compute(s, w[0], std::move(deps), what + (forward ? " before dispatch" : " before combine"));
  const bool inlined = mode != Inline::None;  // the all-to-alls ride on the pieces before them
  const int first = inlined ? before : all_to_all(em, s, l, {before}, (forward ? "dispatch " : "combine grad ") + l.name + tag, true);
  // The shared experts' pieces run on the stream while the all-to-all before the experts, and
  // the one after them, are in flight (Megatron-Core's shared-expert overlap; not inlined).
  if (w[3] >= 0) em.compute(s, w[3], {before}, what + " shared experts");
  std::vector<int> done{em.compute(s, w[1], {first}, what + " experts")};
  if (w[5] >= 0) {
    const int slow_rank = em.shape().place.gpu(em.replica() + 1, s, 0);  // stands for the group's most loaded GPU
    std::vector<int> after{first};
    if (auto prev = last_slow_.find(s); prev != last_slow_.end()) after.push_back(prev->second);
    last_slow_[s] = em.plan().graph.add_compute(slow_rank, w[5], taskgraph::Category::Compute, what + " experts, most loaded GPU", after);
    done.push_back(last_slow_[s]);
  }
  if (inlined) return em.compute(s, w[2], done, what + (forward ? " after combine" : " after dispatch"));
  const int second = all_to_all(em, s, l, done, (forward ? "combine " : "dispatch grad ") + l.name + tag, false);
  if (w[4] >= 0) em.compute(s, w[4], done, what + " shared experts, second part");
  return em.compute(s, w[2], {second}, what + (forward ? " after combine" : " after dispatch"));
}

// Expert gradients, bucket by bucket as backward produces them, summed (or reduce-scattered under
// ZeRO-1 and ZeRO-2) over the expert-data-parallel groups. They queue among themselves but beside
// the dense buckets (other process groups, as Megatron-Core's expert-data-parallel group is); the
// last waits for the dense ones too, so that the optimizer after it has every gradient.
void Experts::after_gradient_sync(Planner& em, int s) {
  const auto& p = em.spec();
  if (p.expert_data() <= 1) return;
  const Layers mine = em.shape().stage_layers(s);
  const auto buckets = make_buckets(mine, wire_grad_bytes(p, em.training().precision), p.bucket_bytes, p.first_bucket_bytes,
                                    BucketParams::Expert);
  const CollectiveOp op = p.zero_stage == 0 ? CollectiveOp::AllReduce : CollectiveOp::ReduceScatter;
  int& stream = em.comm_stream(s);
  const int dense_last = stream;
  int previous = -1;
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    std::vector<int> deps;
    for (std::size_t d = 0; d < em.replica_last().size(); ++d) {
      if (p.overlap_grad_reduce) deps.push_back(em.finals(d).at(mine[static_cast<std::size_t>(buckets[b].ready_after_layer)]));
      else deps.push_back(em.replica_last()[d][static_cast<std::size_t>(s)]);
    }
    if (previous >= 0) deps.push_back(previous);
    if (b + 1 == buckets.size() && dense_last >= 0) deps.push_back(dense_last);
    previous = em.collective(op, em.expert_data_groups(s), buckets[b].bytes, deps,
                             std::string(taskgraph::to_string(op)) + " expert bucket " + std::to_string(b));
  }
  if (previous >= 0) stream = previous;
}

// Per layer and pass: one task, or an MoE layer's three pieces (and the most loaded GPU's
// experts) with two all-to-alls, its forward again before a backward under full recomputation
// (under the moe recompute module, the MoE layer's own); the all-to-alls once per expert-parallel
// group where the replicas join them.
Experts::Passes Experts::passes(const Count& c) const {
  Passes out;
  const bool handed = framework_hands_moe_layers(c.p);  // a pass taken whole still hands us its MoE layers
  for (int j = 0; j < c.k.chunks; ++j)
    for (const auto& [kind, n] : pass_kinds(c.p.schedule, c.k.pipeline, c.k.stage_of(j), c.k.micro_batches)) {
      const bool taken = c.taken(kind);
      if (taken ? !handed : !c.split(kind)) continue;
      for (const auto* l : c.k.chunk_layers[static_cast<std::size_t>(j)]) {
        if (!l->experts.moe()) {
          if (!taken) out.computes += static_cast<double>(n);
          continue;
        }
        const Recompute r = c.k.checkpoints.of(*l);
        const bool again = !kind.forward && (r == Recompute::Full || reruns_moe_module(*l, r, c.p));
        const double times = static_cast<double>(n) * (again ? 2 : 1);
        const bool apart = shared_experts_apart(c.p, *l);
        out.computes += times * (3 + (slower(slowest_expert_load(c.p, *c.model, *l)) ? 1 : 0) + (apart ? 2 : 0));
        if (c.p.moe_a2a_overlap == ParallelismSpec::MoeOverlap::None) out.all_to_alls += times * 2;  // else inline
      }
    }
  out.computes *= c.per_replica();
  out.all_to_alls *= c.joined ? static_cast<double>(c.k.data / c.k.expert) * c.k.iterations : c.per_replica();
  return out;
}

// Each stage's expert gradient buckets, where its gradients are synchronised at all.
double Experts::buckets(const Count& c) {
  const bool synced = c.k.sync && !c.p.schedule->updates_per_backward && c.k.grad_ranks > 1 && c.p.zero_stage != 3;
  if (!synced || c.k.expert_data <= 1) return 0;
  double n = 0;
  for (int s = 0; s < c.k.pipeline; ++s)
    n += static_cast<double>(make_buckets(c.k.stage_layers(s), wire_grad_bytes(c.p, c.t.precision), c.p.bucket_bytes,
                                          c.p.first_bucket_bytes, BucketParams::Expert).size());
  return n;
}

double Experts::tasks(const Count& c) const {
  const Passes p = passes(c);
  return p.computes + p.all_to_alls + buckets(c);
}

CollectiveCounts Experts::collectives(const Count& c) const {
  const CollectiveOp op = c.p.zero_stage == 0 ? CollectiveOp::AllReduce : CollectiveOp::ReduceScatter;
  const GroupKind groups = c.joined ? GroupKind::ExpertBlock : GroupKind::Expert;  // each block joins its own
  return {{CollectiveOp::AllToAll, taskgraph::Algorithm::Direct, groups, passes(c).all_to_alls},
          {op, c.p.algorithm, GroupKind::ExpertData, buckets(c)}};
}

}  // namespace

std::unique_ptr<Unit> make_experts(const ParallelismSpec& p) { return std::make_unique<Experts>(p); }

}  // namespace dtsim::strategies
