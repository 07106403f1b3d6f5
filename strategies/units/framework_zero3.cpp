// ZeRO-3 and FSDP as DeepSpeed and PyTorch run them (strategies/framework.hpp): a pass split where
// it waits for gathers. DeepSpeed's hooks gather per sub-module, so the compute runs op by op;
// FSDP's per unit, so a layer at a time. Gathers queue on one stream, each issued no earlier than
// its prefetch depth allows; reduce-scatters on another.
#include <algorithm>
#include <iterator>
#include <map>
#include <tuple>
#include <utility>

#include "strategies/planner.hpp"
#include "strategies/tp_overlap.hpp"
#include "strategies/units/units.hpp"
#include "strategies/units/zero3_trace.hpp"

namespace dtsim::strategies {

namespace {

using namespace zero3;  // the parameter trace the unit emits from

class FrameworkZero3 final : public Unit {
 public:
  explicit FrameworkZero3(const ParallelismSpec& p) : on_(framework_zero3(p)) {}
  const char* name() const override { return "framework-zero3"; }

  // Each replica starts as the first did (plan_replicas.cpp): nothing reduced, no synchronisation.
  void start_replica(Planner& em) override {
    if (!em.replicas_join() || em.replica() == 0) return;
    sync_ = -1;
    last_rs_ = -1;
  }
  bool takes(const PassKind&) const override { return on_; }
  void emit_pass(Planner& em, Pass& pass) override;
  int step_waits_for() const override { return last_rs_; }

  double tasks(const Count& c) const override {
    if (!on_) return 0;
    double computes = 0, collectives = 0;
    for (const auto& layers : c.k.chunk_layers) {
      computes += segments_per_micro_batch(layers, c.p, c.k.checkpoints);
      const Collectives n = micro_batch_collectives(layers, c.p, c.k.checkpoints);
      collectives += n.gathers + n.reduces + n.expert_gathers + n.expert_reduces;
      if (c.p.framework.reduce_copy_in) computes += n.reduces + n.expert_reduces;  // FSDP2: a copy-in per reduce
    }
    const double m = static_cast<double>(c.k.micro_batches);
    if (hybrid_shard(c.p))
      for (const auto& layers : c.k.chunk_layers) collectives += static_cast<double>(zero3_reduce_buckets(layers, c.p.framework).size());
    return m * (computes * c.per_replica() + collectives * c.per_collective());
  }
  CollectiveCounts collectives(const Count& c) const override {
    if (!on_) return {};
    Collectives n;
    for (const auto& layers : c.k.chunk_layers) {
      const Collectives x = micro_batch_collectives(layers, c.p, c.k.checkpoints);
      n.gathers += x.gathers, n.reduces += x.reduces, n.expert_gathers += x.expert_gathers, n.expert_reduces += x.expert_reduces;
    }
    const double gathers = n.gathers, reduces = n.reduces;
    const double times = static_cast<double>(c.k.micro_batches) * c.per_collective();
    if (hybrid_shard(c.p))
      return {{CollectiveOp::AllGather, c.p.algorithm, GroupKind::Shard, gathers * times},
              {CollectiveOp::ReduceScatter, c.p.algorithm, GroupKind::Shard, reduces * times},
              {CollectiveOp::AllReduce, c.p.algorithm, GroupKind::Replicate, reduces * times}};
    CollectiveCounts out{{CollectiveOp::AllGather, c.p.algorithm, GroupKind::Data, gathers * times},
                         {CollectiveOp::ReduceScatter, c.p.algorithm, GroupKind::Data, reduces * times}};
    if (n.expert_gathers + n.expert_reduces > 0) {
      out.push_back({CollectiveOp::AllGather, c.p.algorithm, GroupKind::ExpertData, n.expert_gathers * times});
      out.push_back({CollectiveOp::ReduceScatter, c.p.algorithm, GroupKind::ExpertData, n.expert_reduces * times});
    }
    return out;
  }
  std::string replay_only(const ParallelismSpec&) const override { return "framework behaviour (deepspeed, fsdp)"; }

 private:
  // The gathers of the micro-batch being emitted: each one's task, and the compute task before its first use.
  struct Micro {
    std::vector<int>& task;
    std::vector<int>& pred;
    std::vector<char>& copied;  // FSDP2: the gather's output has been copied out (its first use)
  };
  // Backward: gradients fill reduce-scatter buckets (DeepSpeed) or go per unit (FSDP); FSDP's
  // root unit reduces once its last layer is done.
  struct Reducing {
    double bucket = 0, root = 0;
    int bucket_ready = -1, root_ready = -1;
    std::vector<double> tensors;  // per_parameter: the bucket's tensors, each reduce-scattered alone
  };
  void issue(Planner& em, const Pass& pass, Micro& mb, int g);
  int gather(Planner& em, const Pass& pass, Micro& mb, int g);
  int gather_per_tensor(Planner& em, const Pass& pass, Micro& mb, int g);
  int segment_work(Planner& em, const Pass& pass, const models::Layer& l, const std::vector<Item>& items, std::size_t a,
                   std::size_t b, bool several, double copy_bytes);
  double copy_out_bytes(const Planner& em, Micro& mb, int g) const;
  double gathered_bytes(const Planner& em, std::size_t g, double params) const;
  int copy_in(Planner& em, const Pass& pass, double params, int ready);
  std::vector<int> emit_segments(Planner& em, Pass& pass, Micro& mb, const models::Layer& l, const std::vector<Item>& items,
                                 int& last);
  void collect(Planner& em, const Pass& pass, Reducing& r, const models::Layer& l, const std::vector<Item>& items,
               const std::vector<int>& item_task, int last);
  void reduce(Planner& em, const Pass& pass, const std::vector<double>& tensors, int ready);
  void reduce_experts(Planner& em, const Pass& pass, double params, int ready);
  int sharded_collective(Planner& em, int s, CollectiveOp op, double bytes, std::vector<int> deps, const std::string& label,
                         bool experts = false);

  bool on_;
  Trace trace_;  // the first chunk's (one pipeline stage)
  std::vector<double> fp8_share_;  // per gather: its layer's FP8 GEMM weights among its parameters
  std::map<std::int64_t, std::vector<int>> gather_task_, gather_pred_;  // per (replica, micro-batch)
  std::map<std::int64_t, std::vector<char>> gather_copied_;
  int last_rs_ = -1, sync_ = -1;  // the reduce stream's last task; the end-of-backward synchronisation
  bool first_ = true;             // the pass's first compute task is still to come
  std::map<std::tuple<const models::Layer*, bool, std::size_t, double>, int> segment_works_;
};

void FrameworkZero3::emit_pass(Planner& em, Pass& pass) {
  const auto& f = em.spec().framework;
  const bool forward = pass.kind.forward;
  const Layers& layers = *pass.layers;
  const Checkpoints& ck = em.shape().checkpoints;
  if (trace_.uses.empty()) {
    trace_ = Trace(layers, f, ck);
    for (const auto& g : trace_.gathers) {
      const models::Layer* l = layers[static_cast<std::size_t>(g.layer)];
      if (f.fp8_all_gather) fp8_share_.push_back(l->params() > 0 ? fp8_weight_params({l}) / l->params() : 0.0);
    }
  }
  const std::int64_t key = static_cast<std::int64_t>(em.replica()) * em.shape().micro_batches + pass.op->micro_batch;
  Micro mb{gather_task_[key], gather_pred_[key], gather_copied_[key]};
  if (mb.task.empty()) {
    mb.task.assign(trace_.gathers.size(), -1);
    mb.pred.assign(trace_.gathers.size(), -1);
    mb.copied.assign(trace_.gathers.size(), 0);
  }
  std::size_t cursor = forward ? 0 : trace_.forward_uses;
  first_ = true;
  int last = -1;
  Reducing r;
  std::vector<int> early;
  const int n = static_cast<int>(layers.size());
  for (int step = 0; step < n; ++step) {
    const int li = forward ? step : n - 1 - step;
    const models::Layer& l = *layers[static_cast<std::size_t>(li)];
    const auto items = layer_items(l, li, forward, f, ck.of(l), trace_.uses, trace_.wait, cursor, early);
    for (int g : early) gather(em, pass, mb, g);
    const auto item_task = emit_segments(em, pass, mb, l, items, last);
    if (forward) em.after_layer(pass, l, last, this);  // activation offload
    else collect(em, pass, r, l, items, item_task, last);
  }
  if (forward) return;
  if (r.bucket > 0) reduce(em, pass, f.per_parameter ? r.tensors : std::vector<double>{r.bucket}, r.bucket_ready);
  if (r.root > 0) reduce(em, pass, {r.root}, r.root_ready);
  sync_ = f.sync_after_backward ? last_rs_ : -1;
}

// Over the shard (data-parallel) groups, or the expert-data-parallel ones for a block's experts.
int FrameworkZero3::sharded_collective(Planner& em, int s, CollectiveOp op, double bytes, std::vector<int> deps,
                                       const std::string& label, bool experts) {
  taskgraph::Collective c{op, em.spec().algorithm, experts ? em.expert_data_groups(s) : em.shard_groups(s), bytes};
  c.launch_s = em.spec().framework.collective_launch_s;
  return em.group_collective(s, std::move(c), std::move(deps), label);
}

// Gathers are issued in order, gather g once the compute before the first use of gather
// g - depth has ended (depth < 0: at once), so each enters the queue ahead of the
// reduce-scatters issued after that point.
void FrameworkZero3::issue(Planner& em, const Pass& pass, Micro& mb, int g) {
  const auto& f = em.spec().framework;
  const auto G = static_cast<std::size_t>(g);
  int& comm = em.comm_stream(pass.stage);
  std::vector<int> deps;
  if (comm >= 0) deps.push_back(comm);
  if (sync_ >= 0) deps.push_back(sync_);  // the host waited there before issuing anything
  const int depth = trace_.gathers[G].backward ? f.backward_prefetch_depth : f.forward_prefetch_depth;
  // Per tensor, a burst goes out when the compute reaches the burst before it.
  const int burst = trace_.gathers[G].burst;
  const int anchor = f.per_parameter ? (burst > 0 ? trace_.first(burst - 1) : -1) : depth >= 0 ? g - depth : -1;
  if (anchor >= 0 && mb.pred[static_cast<std::size_t>(anchor)] >= 0) deps.push_back(mb.pred[static_cast<std::size_t>(anchor)]);
  const double wbytes = weight_bytes_per_param(em.training().precision);
  const double experts = expert_part(em.spec(), *(*pass.layers)[static_cast<std::size_t>(trace_.gathers[G].layer)]);
  mb.task[G] = sharded_collective(em, pass.stage, CollectiveOp::AllGather, gathered_bytes(em, G, trace_.gathers[G].params - experts), deps,
                                  "zero3 gather " + std::to_string(g) + pass.tag);
  if (experts > 0)  // the block's experts next, on the same queue; the compute waits for both
    mb.task[G] = sharded_collective(em, pass.stage, CollectiveOp::AllGather, experts * wbytes, {mb.task[G]},
                                    "zero3 gather experts " + std::to_string(g) + pass.tag, true);
  comm = mb.task[G];
  if (em.replica() == 0 && pass.stage == 0) em.plan().zero3_gathers += experts > 0 ? 2 : 1;
}

// The compute stream reaches gather g's first use: what it may now issue goes out.
int FrameworkZero3::gather(Planner& em, const Pass& pass, Micro& mb, int g) {
  const auto& f = em.spec().framework;
  if (f.per_parameter) return gather_per_tensor(em, pass, mb, g);
  const auto G = static_cast<std::size_t>(g);
  if (mb.pred[G] < 0) mb.pred[G] = em.compute_stream(pass.stage);
  const int count = static_cast<int>(trace_.gathers.size());
  const int depth = trace_.gathers[G].backward ? f.backward_prefetch_depth : f.forward_prefetch_depth;
  const int upto = depth < 0 ? count - 1 : std::min(count - 1, g + depth);
  for (int k = 0; k <= upto; ++k)
    if (mb.task[static_cast<std::size_t>(k)] < 0) issue(em, pass, mb, k);
  return mb.task[G];
}

// DeepSpeed before 0.6 (stage3.py fetch_sub_module, prefetch_next_sub_modules; partition_parameters.py
// _allgather_param): at the first use of burst B the host synchronises with the GPU, then issues
// burst B + 1 tensor by tensor, each after torch.cuda.synchronize(), before it launches the
// sub-module's kernels. So the compute waits for every tensor of B + 1 but its last, which alone
// overlaps it.
int FrameworkZero3::gather_per_tensor(Planner& em, const Pass& pass, Micro& mb, int g) {
  const int B = trace_.gathers[static_cast<std::size_t>(g)].burst;
  const int own_first = trace_.first(B), own_end = trace_.first(B + 1);
  const int next_end = B + 1 < trace_.bursts() ? trace_.first(B + 2) : own_end;
  if (mb.pred[static_cast<std::size_t>(own_first)] < 0) mb.pred[static_cast<std::size_t>(own_first)] = em.compute_stream(pass.stage);
  bool next_now = false;
  for (int k = 0; k < next_end; ++k) {
    if (mb.task[static_cast<std::size_t>(k)] >= 0) continue;
    issue(em, pass, mb, k);
    next_now = next_now || k >= own_end;
  }
  const int waited = next_now && next_end - own_end >= 2 ? next_end - 2 : own_end - 1;
  return mb.task[static_cast<std::size_t>(waited)];
}

// FSDP2 copies gather g's output into the unsharded parameters where the compute first uses it:
// it reads and writes every gathered byte (foreach_all_gather_copy_out). 0 elsewhere.
double FrameworkZero3::copy_out_bytes(const Planner& em, Micro& mb, int g) const {
  if (g < 0 || !em.spec().framework.gather_copy_out) return 0;
  const auto G = static_cast<std::size_t>(g);
  if (std::exchange(mb.copied[G], char{1})) return 0;
  return 2.0 * gathered_bytes(em, G, trace_.gathers[G].params);
}

// Gather g's bytes for `params` of its parameters, in the weights' dtype; under torchao's float8
// all-gather its layer's FP8 GEMM weights (their share of the layer's parameters, exact for FSDP's
// whole units) in one byte each (WeightWithDynamicFloat8CastTensor.fsdp_pre_all_gather).
double FrameworkZero3::gathered_bytes(const Planner& em, std::size_t g, double params) const {
  const double wbytes = weight_bytes_per_param(em.training().precision);
  if (g >= fp8_share_.size()) return params * wbytes;  // shares are kept only under the float8 all-gather
  const double fp8 = params * fp8_share_[g];
  return (params - fp8) * wbytes + fp8;
}

// The work of items [a, b) of layer l: FSDP2's copy of the gathered parameters first, then their
// kernels (a backward's gradient accumulation where not fused), and the layer's tensor-parallel
// collectives with its last segment.
int FrameworkZero3::segment_work(Planner& em, const Pass& pass, const models::Layer& l, const std::vector<Item>& items,
                                 std::size_t a, std::size_t b, bool several, double copy_bytes) {
  const bool fwd = pass.kind.forward;
  auto [wit, fresh] = segment_works_.try_emplace({&l, fwd, a, copy_bytes}, -1);
  if (!fresh) return wit->second;
  const auto& p = em.spec();
  taskgraph::Work w;
  w.name = std::string(fwd ? "fwd " : "bwd ") + l.name;
  if (several) w.name += "." + l.ops[static_cast<std::size_t>(items[a].op)].name;
  if (copy_bytes > 0) {
    models::Kernel copy;
    copy.name = "fsdp all-gather copy-out";
    copy.bytes = copy_bytes;
    w.kernels.push_back(copy);
  }
  std::vector<TpLinearAt> linears;  // the segment's tensor-parallel GEMMs (tp_overlap.hpp)
  const auto again = fwd ? std::vector<Rerun>{} : reruns(l, em.shape().checkpoints.of(l));
  for (std::size_t i = a; i < b; ++i) {
    const auto& o = l.ops[static_cast<std::size_t>(items[i].op)];
    const std::size_t at = w.kernels.size();
    const bool forward = fwd || items[i].rerun;
    if (items[i].rerun && !again[static_cast<std::size_t>(items[i].op)].whole) {
      std::ranges::copy(rerun_kernels(o, again[static_cast<std::size_t>(items[i].op)]), std::back_inserter(w.kernels));
      continue;  // a part of the op: no linear whose collectives it could hide
    }
    if (forward) {
      w.kernels.insert(w.kernels.end(), o.forward.begin(), o.forward.end());
    } else {
      w.kernels.insert(w.kernels.end(), o.backward.begin(), o.backward.end());
    }
    if (auto lin = find_tp_linear(o, forward, w.kernels, at)) linears.push_back(*lin);
    if (!forward && !p.fused_grad_accumulation && o.params > 0)
      w.kernels.push_back(models::grad_accumulate_kernel(o.params, em.model().options.activation_bytes));
  }
  if (b == items.size()) {
    auto tp = tensor_parallel_comms(l, fwd, p, em.tensor_group(pass.stage));
    if (!fwd) {
      auto rerun_tp = recompute_comms(l, em.shape().checkpoints.of(l), p, em.tensor_group(pass.stage));
      tp.insert(tp.end(), rerun_tp.begin(), rerun_tp.end());
    }
    w.comms = overlap_tp_comms(std::move(tp), linears, p);
  }
  wit->second = em.works().get(std::move(w));
  return wit->second;
}

// Layer l's segments as compute tasks, each after the gather it waits for; returns each item's task.
std::vector<int> FrameworkZero3::emit_segments(Planner& em, Pass& pass, Micro& mb, const models::Layer& l,
                                               const std::vector<Item>& items, int& last) {
  const auto starts = segment_starts(items);
  std::vector<int> item_task(items.size(), -1);
  for (std::size_t sg = 0; sg < starts.size(); ++sg) {
    const std::size_t a = starts[sg], b = sg + 1 < starts.size() ? starts[sg + 1] : items.size();
    const bool moe = handed(em.spec(), l);  // one segment: FSDP gathers the block whole
    const double copy = copy_out_bytes(em, mb, items[a].wait);
    const int work = moe ? -1 : segment_work(em, pass, l, items, a, b, starts.size() > 1, copy);
    std::vector<int> deps = std::move(pass.cross);
    pass.cross.clear();
    if (sg == 0) em.before_layer(pass, l, deps, this);  // activation offload's fetch
    if (first_ && pass.kind.forward && sync_ >= 0) deps.push_back(sync_);
    first_ = false;
    if (items[a].wait >= 0) deps.push_back(gather(em, pass, mb, items[a].wait));
    // Before 0.6 the fetch's torch.cuda.synchronize() also waits for the reduce-scatters in flight.
    if (items[a].wait >= 0 && em.spec().framework.per_parameter && last_rs_ >= 0) deps.push_back(last_rs_);
    last = moe ? em.layer_task(pass, l, std::move(deps))
               : em.compute(pass.stage, work, deps, std::string(pass.kind.forward ? "fwd " : "bwd ") + l.name + pass.tag);
    for (std::size_t i = a; i < b; ++i) item_task[i] = last;
  }
  return item_task;
}

// Layer l's gradients into the reduce-scatters: bucket by bucket, per layer, or into FSDP's root.
void FrameworkZero3::collect(Planner& em, const Pass& pass, Reducing& r, const models::Layer& l, const std::vector<Item>& items,
                             const std::vector<int>& item_task, int last) {
  const auto& f = em.spec().framework;
  if (f.reduce_bucket_params > 0) {
    for (std::size_t i = 0; i < items.size(); ++i) {
      const double p = items[i].rerun ? 0.0 : l.ops[static_cast<std::size_t>(items[i].op)].params;
      if (p <= 0) continue;
      if (r.bucket > 0 && r.bucket + p > f.reduce_bucket_params) {
        reduce(em, pass, f.per_parameter ? r.tensors : std::vector<double>{r.bucket}, r.bucket_ready);
        r.bucket = 0;
        r.tensors.clear();
      }
      r.bucket += p;
      if (f.per_parameter)
        for (double x : models::param_tensors(l.ops[static_cast<std::size_t>(items[i].op)])) r.tensors.push_back(x);
      r.bucket_ready = item_task[i];
    }
  } else if (f.gather_per_layer && l.kind != models::LayerKind::Block) {
    r.root += l.params();
    r.root_ready = last;
  } else if (l.params() > 0) {
    const double experts = expert_part(em.spec(), l);
    if (experts > 0) reduce_experts(em, pass, experts, last);
    reduce(em, pass, {l.params() - experts}, last);
  }
}

// A block's experts' gradients, reduce-scattered over the expert-data-parallel group on the
// reduce queue (HSDP is refused with experts: no all-reduce across replicas).
void FrameworkZero3::reduce_experts(Planner& em, const Pass& pass, double params, int ready) {
  const auto& f = em.spec().framework;
  const double rbytes = f.reduce_bytes > 0 ? f.reduce_bytes : grad_bytes_per_param(em.training().precision);
  int& comm = em.comm_stream(pass.stage);
  std::vector<int> deps{copy_in(em, pass, params, ready)};
  if (last_rs_ >= 0) deps.push_back(last_rs_);
  if (comm >= 0) deps.push_back(comm);
  last_rs_ = sharded_collective(em, pass.stage, CollectiveOp::ReduceScatter, params * rbytes, deps,
                                "zero3 reduce-scatter experts" + pass.tag, true);
  comm = last_rs_;
  if (em.replica() == 0 && pass.stage == 0) ++em.plan().zero3_reduce_scatters;
}

// FSDP2's foreach_reduce (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py, pytorch/pytorch
// @010ae4a): foreach_reduce_scatter_copy_in (torch._chunk_cat) copies the unit's gradients into the
// reduce-scatter's input, in the reduce dtype, on the current (compute) stream, and the reduce-scatter
// stream waits for it. It reads each gradient and writes it in the reduce dtype: a cast up where that
// is wider (bf16 into fp32, torchtitan's default). Returns the task the reduce waits for: the copy,
// or `ready` where the framework copies nothing.
int FrameworkZero3::copy_in(Planner& em, const Pass& pass, double params, int ready) {
  const auto& f = em.spec().framework;
  if (!f.reduce_copy_in || params <= 0) return ready;
  const double gbytes = grad_bytes_per_param(em.training().precision);
  const double rbytes = f.reduce_bytes > 0 ? f.reduce_bytes : gbytes;
  models::Kernel k;
  k.name = "fsdp reduce-scatter copy-in";
  k.bytes = params * (gbytes + rbytes);
  k.elems = params;
  k.elem_bytes = gbytes;
  if (rbytes > gbytes) k.role = models::KernelRole::CastUp;
  taskgraph::Work w;
  w.name = k.name;
  w.kernels.push_back(std::move(k));
  return em.compute(pass.stage, em.works().get(std::move(w)), {ready}, "fsdp reduce-scatter copy-in" + pass.tag);
}

// Both frameworks reduce on a stream of their own, but it shares the NICs with the gathers: one
// queue for both keeps their bytes from crossing the network at twice its speed (the analytical
// backend prices each collective alone).
// `tensors`: one reduce-scatter each (the bucket whole, or DeepSpeed before 0.6's tensor by tensor,
// partition_parameters.py _reduce_scatter_gradients).
void FrameworkZero3::reduce(Planner& em, const Pass& pass, const std::vector<double>& tensors, int ready) {
  const auto& f = em.spec().framework;
  const double rbytes = f.reduce_bytes > 0 ? f.reduce_bytes : grad_bytes_per_param(em.training().precision);
  int& comm = em.comm_stream(pass.stage);
  double params = 0;
  for (double t : tensors) params += t;
  ready = copy_in(em, pass, params, ready);
  for (double params : tensors) {
    std::vector<int> deps{ready};
    if (last_rs_ >= 0) deps.push_back(last_rs_);
    if (comm >= 0) deps.push_back(comm);
    last_rs_ = sharded_collective(em, pass.stage, CollectiveOp::ReduceScatter, params * rbytes, deps, "zero3 reduce-scatter" + pass.tag);
    if (hybrid_shard(em.spec())) {  // FSDP2's foreach_reduce: the shard all-reduced across the replicas next
      taskgraph::Collective c{CollectiveOp::AllReduce, em.spec().algorithm, em.replicate_groups(pass.stage),
                              params * rbytes / em.shape().shard_ranks};
      c.launch_s = f.collective_launch_s;
      last_rs_ = em.group_collective(pass.stage, std::move(c), {last_rs_}, "zero3 all-reduce across replicas" + pass.tag);
    }
    comm = last_rs_;
    if (em.replica() == 0 && pass.stage == 0) ++em.plan().zero3_reduce_scatters;
  }
}

}  // namespace

bool framework_zero3(const ParallelismSpec& p) {
  return p.zero_stage == 3 && p.data * p.context > 1 && p.framework.framework != Framework::MegatronLM;
}

bool framework_hands_moe_layers(const ParallelismSpec& p) { return framework_zero3(p) && p.expert > 1; }

std::unique_ptr<Unit> make_framework_zero3(const ParallelismSpec& p) { return std::make_unique<FrameworkZero3>(p); }

}  // namespace dtsim::strategies
