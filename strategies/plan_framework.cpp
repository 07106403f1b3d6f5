// ZeRO-3 and FSDP as DeepSpeed and PyTorch run them (strategies/framework.hpp), and the PCIe
// copies of offload: the optimizer on the host (ZeRO-Offload) and activations swapped to host
// memory.
#include <algorithm>
#include <stdexcept>
#include <utility>

#include "strategies/planner.hpp"
#include "strategies/tp_overlap.hpp"

namespace dtsim::strategies {

namespace {
bool full_rerun(Recompute r) { return r == Recompute::Full || r == Recompute::Stage; }
bool rerun_op(const models::Layer& l, const models::Op& op, Recompute r) {
  return l.kind == models::LayerKind::Block && (full_rerun(r) || (r == Recompute::Selective && op.selective));
}
// One op's part of a pass: its forward (or recompute forward) or its backward kernels, and the
// gather it waits for.
struct Item {
  int op = 0;
  bool rerun = false;
  int wait = -1;
};
}  // namespace

bool Planner::framework_zero3() const {
  return p_.zero_stage == 3 && grad_ranks() > 1 && p_.framework.framework != Framework::MegatronLM;
}

int Planner::sharded_collective(int s, CollectiveOp op, double bytes, std::vector<int> deps, const std::string& label) {
  taskgraph::Collective c{op, p_.algorithm, data_groups(s), bytes};
  c.launch_s = p_.framework.collective_launch_s;
  return group_collective(s, std::move(c), std::move(deps), label);
}

// A pass of ZeRO-3 split where it waits for gathers: DeepSpeed's hooks gather per sub-module, so
// the compute runs op by op; FSDP's per unit, so a layer at a time. Gathers queue on one stream,
// each issued no earlier than its prefetch depth allows; reduce-scatters on another.
void Planner::emit_sharded(int s, int j, const PipeOp& op, std::vector<int> cross, const std::string& tag) {
  const auto& f = p_.framework;
  const auto S = static_cast<std::size_t>(s);
  const Layers& layers = k_.chunk_layers[static_cast<std::size_t>(j)];
  const bool rc = full_rerun(p_.recompute);
  if (z3_uses_.empty()) {
    z3_uses_ = param_uses(layers, f, rc);
    z3_gathers_ = zero3_gathers(layers, f, rc, &z3_wait_);
    z3_forward_uses_ = static_cast<std::size_t>(
        std::count_if(z3_uses_.begin(), z3_uses_.end(), [](const ParamUse& u) { return !u.backward; }));
  }
  const std::int64_t key = static_cast<std::int64_t>(d_) * k_.micro_batches + op.micro_batch;
  auto& gtask = z3_gather_task_[key];
  auto& gpred = z3_gather_pred_[key];
  if (gtask.empty()) {
    gtask.assign(z3_gathers_.size(), -1);
    gpred.assign(z3_gathers_.size(), -1);
  }
  const int tpg = tp_group_[S];
  const double wbytes = weight_bytes_per_param(t_.precision);
  const double rbytes = f.reduce_bytes > 0 ? f.reduce_bytes : grad_bytes_per_param(t_.precision);

  // Gathers are issued in order, gather g once the compute before the first use of gather
  // g - depth has ended (depth < 0: at once), so each enters the queue ahead of the
  // reduce-scatters issued after that point.
  const int count = static_cast<int>(z3_gathers_.size());
  auto issue = [&](int g) {
    const auto G = static_cast<std::size_t>(g);
    std::vector<int> deps;
    if (last_comm_[S] >= 0) deps.push_back(last_comm_[S]);
    if (z3_sync_ >= 0) deps.push_back(z3_sync_);  // the host waited there before issuing anything
    const int depth = z3_gathers_[G].backward ? f.backward_prefetch_depth : f.forward_prefetch_depth;
    if (depth >= 0 && g - depth >= 0 && gpred[static_cast<std::size_t>(g - depth)] >= 0)
      deps.push_back(gpred[static_cast<std::size_t>(g - depth)]);
    gtask[G] = sharded_collective(s, CollectiveOp::AllGather, z3_gathers_[G].params * wbytes, deps,
                                  "zero3 gather " + std::to_string(g) + tag);
    last_comm_[S] = gtask[G];
    if (d_ == 0 && s == 0) ++plan_.zero3_gathers;
  };
  // The compute stream reaches gather g's first use: what it may now issue goes out.
  auto gather = [&](int g) {
    const auto G = static_cast<std::size_t>(g);
    if (gpred[G] < 0) gpred[G] = last_compute_[S];
    const int depth = z3_gathers_[G].backward ? f.backward_prefetch_depth : f.forward_prefetch_depth;
    const int upto = depth < 0 ? count - 1 : std::min(count - 1, g + depth);
    for (int k = 0; k <= upto; ++k)
      if (gtask[static_cast<std::size_t>(k)] < 0) issue(k);
    return gtask[G];
  };
  auto use_at = [&](std::size_t& cursor, int layer, int op_index) {
    if (cursor >= z3_uses_.size() || z3_uses_[cursor].layer != layer || z3_uses_[cursor].op != op_index)
      throw std::logic_error("ZeRO-3 parameter trace out of step with the passes");
    return z3_wait_[cursor++];
  };

  std::size_t cursor = op.forward ? 0 : z3_forward_uses_;
  bool first = true;
  int last = -1;
  // Backward: gradients fill reduce-scatter buckets (DeepSpeed) or go per unit (FSDP); FSDP's
  // root unit reduces once its last layer is done.
  double bucket = 0, root = 0;
  int bucket_ready = -1, root_ready = -1;
  // Both frameworks reduce on a stream of their own, but it shares the NICs with the gathers: one
  // queue for both keeps their bytes from crossing the network at twice its speed (the analytical
  // backend prices each collective alone).
  auto reduce = [&](double params, int ready) {
    std::vector<int> deps{ready};
    if (z3_last_rs_ >= 0) deps.push_back(z3_last_rs_);
    if (last_comm_[S] >= 0) deps.push_back(last_comm_[S]);
    z3_last_rs_ = sharded_collective(s, CollectiveOp::ReduceScatter, params * rbytes, deps, "zero3 reduce-scatter" + tag);
    last_comm_[S] = z3_last_rs_;
    if (d_ == 0 && s == 0) ++plan_.zero3_reduce_scatters;
  };

  const int n = static_cast<int>(layers.size());
  for (int step = 0; step < n; ++step) {
    const int li = op.forward ? step : n - 1 - step;
    const models::Layer* l = layers[static_cast<std::size_t>(li)];
    const int m = static_cast<int>(l->ops.size());
    std::vector<Item> items;
    if (op.forward) {
      for (int k = 0; k < m; ++k) items.push_back({k, false});
    } else {
      for (int k = 0; k < m; ++k)
        if (rerun_op(*l, l->ops[static_cast<std::size_t>(k)], p_.recompute)) items.push_back({k, true});
      for (int k = m - 1; k >= 0; --k) items.push_back({k, false});
    }
    // Which items wait for a gather, in the order of the parameter trace.
    if (f.gather_per_layer) {
      if (l->params() > 0 && !items.empty()) items.front().wait = use_at(cursor, li, -1);
    } else {
      const bool regather = rc && f.regather_for_recompute;
      for (auto& it : items) {
        const double p = l->ops[static_cast<std::size_t>(it.op)].params;
        if (p > 0 && (!it.rerun || regather)) it.wait = use_at(cursor, li, it.op);
      }
      // Without the recompute's own gathers its backward's gathers are needed first.
      if (!items.empty() && items.front().rerun && !regather) {
        std::vector<int> waits;
        for (auto& it : items)
          if (it.wait >= 0) waits.push_back(std::exchange(it.wait, -1));
        if (!waits.empty()) items.front().wait = waits.front();
        for (int g : waits) gather(g);
      }
    }
    // Segments start at each item that waits; each is one compute task.
    std::vector<std::size_t> starts{0};
    for (std::size_t i = 1; i < items.size(); ++i)
      if (items[i].wait >= 0) starts.push_back(i);
    std::vector<int> item_task(items.size(), -1);
    for (std::size_t sg = 0; sg < starts.size(); ++sg) {
      const std::size_t a = starts[sg], b = sg + 1 < starts.size() ? starts[sg + 1] : items.size();
      auto [wit, fresh] = segment_works_.try_emplace({l, op.forward, a}, -1);
      if (fresh) {
        taskgraph::Work w;
        w.name = std::string(op.forward ? "fwd " : "bwd ") + l->name;
        if (starts.size() > 1) w.name += "." + l->ops[static_cast<std::size_t>(items[a].op)].name;
        std::vector<TpLinearAt> linears;  // the segment's tensor-parallel GEMMs (tp_overlap.hpp)
        for (std::size_t i = a; i < b; ++i) {
          const auto& o = l->ops[static_cast<std::size_t>(items[i].op)];
          const std::size_t at = w.kernels.size();
          const bool forward = op.forward || items[i].rerun;
          if (forward) {
            w.kernels.insert(w.kernels.end(), o.forward.begin(), o.forward.end());
          } else {
            w.kernels.insert(w.kernels.end(), o.backward.begin(), o.backward.end());
          }
          if (auto lin = find_tp_linear(o, forward, w.kernels, at)) linears.push_back(*lin);
          if (!forward && !p_.fused_grad_accumulation && o.params > 0)
            w.kernels.push_back(models::grad_accumulate_kernel(o.params, g_.options.activation_bytes));
        }
        if (b == items.size()) w.comms = overlap_tp_comms(tensor_parallel_comms(*l, op.forward, g_, p_, tpg), linears, p_);
        wit->second = table_.get(std::move(w));
      }
      if (sg == 0 && !op.forward && p_.activation_offload) fetch_layer(s, j, op, l, cross);
      std::vector<int> deps = cross;
      cross.clear();
      if (first && op.forward && z3_sync_ >= 0) deps.push_back(z3_sync_);
      first = false;
      if (items[a].wait >= 0) deps.push_back(gather(items[a].wait));
      last = compute(s, wit->second, deps, std::string(op.forward ? "fwd " : "bwd ") + l->name + tag);
      for (std::size_t i = a; i < b; ++i) item_task[i] = last;
    }
    if (op.forward) {
      if (p_.activation_offload) offload_layer(s, j, op, l, last);
      continue;
    }
    if (f.reduce_bucket_params > 0) {
      for (std::size_t i = 0; i < items.size(); ++i) {
        const double p = items[i].rerun ? 0.0 : l->ops[static_cast<std::size_t>(items[i].op)].params;
        if (p <= 0) continue;
        if (bucket > 0 && bucket + p > f.reduce_bucket_params) {
          reduce(bucket, bucket_ready);
          bucket = 0;
        }
        bucket += p;
        bucket_ready = item_task[i];
      }
    } else if (f.gather_per_layer && l->kind != models::LayerKind::Block) {
      root += l->params();
      root_ready = last;
    } else if (l->params() > 0) {
      reduce(l->params(), last);
    }
  }
  if (op.forward) return;
  if (bucket > 0) reduce(bucket, bucket_ready);
  if (root > 0) reduce(root, root_ready);
  z3_sync_ = f.sync_after_backward ? z3_last_rs_ : -1;
}

// A PCIe transfer on one of the GPU's copy engines, after the last copy that way of the same
// GPUs: the replica being emitted, at pipeline stage s (neither another replica's copies nor
// another stage's queue before it: those GPUs have their own engines). What GPUs do share, a
// PCIe switch's uplink and the host's memory, the replay's host links share, not the stream.
// Every GPU the representative stands for copies the same at the same time: the replay prices
// them together on the host links.
int Planner::pcie_copy(int s, double bytes, std::vector<int> deps, bool to_host, const std::string& label) {
  int& stream = copy_streams_.try_emplace({d_, s}, std::array<int, 2>{-1, -1}).first->second[to_host ? 1 : 0];
  if (stream >= 0) deps.push_back(stream);
  auto gpus_of = [&](int from, int to) {
    std::vector<int> gpus;
    for (int d = from; d < to; ++d)
      for (int t = 0; t < p_.tensor; ++t)
        for (int c = 0; c < p_.context; ++c) gpus.push_back(place_.gpu(d, s, t, c));
    return plan_.graph.add_group(std::move(gpus));
  };
  const bool own_tasks = plan_.replicas > 1;  // each replica has its own tasks: its GPUs alone
  auto [group, fresh] = copy_groups_.try_emplace({d_, s}, -1);
  if (fresh) group->second = own_tasks ? gpus_of(d_, d_ + 1) : gpus_of(0, p_.data);
  taskgraph::Work w;
  w.name = "pcie copy";
  w.copy_bytes = bytes;
  w.copy_to_host = to_host;
  w.copy_group = group->second;
  if (own_tasks) {  // the other replicas copy the same at the same moment (analytical price)
    auto [together, made] = copy_together_groups_.try_emplace(s, -1);
    if (made) together->second = gpus_of(0, p_.data);
    w.copy_together_group = together->second;
  }
  stream = plan_.graph.add_compute(rep(s), table_.get(std::move(w)), Category::Copy, label, std::move(deps));
  if (d_ == 0 && s == 0) plan_.pcie_bytes_per_step += bytes;
  return stream;
}

// After a layer's forward, its saved activations go to the host: on their own stream beside the
// next layers (overlapped), or on the compute stream, which waits for them.
void Planner::offload_layer(int s, int j, const PipeOp& op, const models::Layer* l, int pass) {
  const auto S = static_cast<std::size_t>(s);
  const double bytes = kept_activations({l}, p_.recompute);
  if (bytes <= 0) return;
  const int id = pcie_copy(s, bytes, {pass}, true, "offload act " + l->name + " c" + std::to_string(j) + " mb" + std::to_string(op.micro_batch));
  act_down_[{j, static_cast<int>(op.micro_batch), l}] = id;
  if (!p_.framework.activation_offload_overlapped) last_compute_[S] = id;
}

// Before a layer's backward, its activations come back: prefetched while the layer before it
// runs (overlapped), or when the compute stream reaches it.
void Planner::fetch_layer(int s, int j, const PipeOp& op, const models::Layer* l, std::vector<int>& cross) {
  const auto S = static_cast<std::size_t>(s);
  const auto down = act_down_.find({j, static_cast<int>(op.micro_batch), l});
  if (down == act_down_.end()) return;
  std::vector<int> deps{down->second};
  const bool overlapped = p_.framework.activation_offload_overlapped;
  const int issue = overlapped ? (S < prev_compute_.size() ? prev_compute_[S] : -1) : last_compute_[S];
  if (issue >= 0) deps.push_back(issue);
  const int id = pcie_copy(s, kept_activations({l}, p_.recompute), deps, false,
                           "fetch act " + l->name + " c" + std::to_string(j) + " mb" + std::to_string(op.micro_batch));
  cross.push_back(id);
  if (!overlapped) last_compute_[S] = id;
}

// ZeRO-Offload (Ren et al. 2021, Sec. 4): 16-bit gradients go down to the host as backward
// produces them (DeepSpeed copies each reduced bucket), the CPU optimizer runs on the host's
// cores at its memory bandwidth, and the 16-bit parameters come back up.
void Planner::step_optimizer_on_host(int s, int embedding_sync) {
  const Layers mine = stage_layers(s);
  const double shards = p_.zero_stage >= 1 ? grad_ranks() : 1;
  const double shard = layer_params(mine) / shards;
  const double gbytes = grad_bytes_per_param(t_.precision);
  std::vector<int> downs;
  // Gradient buckets as DeepSpeed's reduce buckets fill; with data parallelism each waits for the
  // reductions, alone each follows the backward of its last layer.
  const double cap = p_.framework.reduce_bucket_params * gbytes;
  const auto buckets = make_buckets(mine, gbytes, cap, cap);
  const auto& finals = replica_final_[static_cast<std::size_t>(d_)];
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    std::vector<int> deps;
    if (grad_ranks() > 1 && last_comm_[static_cast<std::size_t>(s)] >= 0) deps.push_back(last_comm_[static_cast<std::size_t>(s)]);
    const auto it = finals.find(mine[static_cast<std::size_t>(buckets[b].ready_after_layer)]);
    deps.push_back(it != finals.end() ? it->second : last_compute_[static_cast<std::size_t>(s)]);
    downs.push_back(pcie_copy(s, buckets[b].bytes / shards, deps, true, "gradients to host " + std::to_string(b)));
  }
  taskgraph::Work w;
  w.name = "host optimizer";
  // Per parameter: read the fp32 weight, gradient and optimizer state, write weight and state
  // back and the 16-bit copy for the GPU (DeepSpeed csrc/adam/cpu_adam_impl.cpp, Step_AVX).
  const double opt = optimizer_bytes_per_param(t_.precision, t_.optimizer);
  const double traffic = 2.0 * opt + 4.0 + weight_bytes_per_param(t_.precision);
  const double flops = t_.optimizer == models::OptimizerKind::Adam ? 12.0 : 4.0;  // Adam's update, per element
  w.fixed_seconds = std::max(shard * traffic / host_.memory_bandwidth_per_gpu, shard * flops / (host_.cores_per_gpu * host_.core_flops));
  std::vector<int> deps = downs;
  if (embedding_sync >= 0) deps.push_back(embedding_sync);
  if (last_compute_[static_cast<std::size_t>(s)] >= 0) deps.push_back(last_compute_[static_cast<std::size_t>(s)]);
  if (z3_last_rs_ >= 0) deps.push_back(z3_last_rs_);
  const int step = plan_.graph.add_compute(rep(s), table_.get(std::move(w)), Category::Optimizer, "host optimizer", deps);
  replica_last_[static_cast<std::size_t>(d_)][static_cast<std::size_t>(s)] =
      pcie_copy(s, shard * weight_bytes_per_param(t_.precision), {step}, false, "parameters to GPU");
}

}  // namespace dtsim::strategies
