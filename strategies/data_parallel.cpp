#include "strategies/data_parallel.hpp"

#include <map>
#include <stdexcept>

namespace dtsim::strategies {

namespace {

using taskgraph::Category;
using taskgraph::TaskGraph;

// Shares one Work among identical layers so the cost model prices each distinct one once.
class WorkTable {
 public:
  explicit WorkTable(TaskGraph& g) : g_(g) {}
  int get(const std::string& name, std::vector<models::Kernel> kernels) {
    std::string key;
    for (const auto& k : kernels)
      key += k.name + ":" + std::to_string(k.batch) + "," + std::to_string(k.m) + "," + std::to_string(k.n) + "," +
             std::to_string(k.k) + "," + std::to_string(k.bytes) + ";";
    auto [it, fresh] = ids_.try_emplace(key, -1);
    if (fresh) it->second = g_.add_work({name, std::move(kernels)});
    return it->second;
  }

 private:
  TaskGraph& g_;
  std::map<std::string, int> ids_;
};

struct LayerWorks {
  int forward = -1, backward = -1;
  double recompute_matmul_flops = 0;  // per micro-batch
};

LayerWorks layer_works(const models::Layer& layer, Recompute r, WorkTable& table) {
  LayerWorks w;
  std::vector<models::Kernel> fwd, bwd;
  bool block = layer.kind == models::LayerKind::Block;
  for (const auto& op : layer.ops) {
    fwd.insert(fwd.end(), op.forward.begin(), op.forward.end());
    bool again = block && (r == Recompute::Full || (r == Recompute::Selective && op.selective));
    if (!again) continue;
    bwd.insert(bwd.end(), op.forward.begin(), op.forward.end());
    if (op.matmul)
      for (const auto& k : op.forward) w.recompute_matmul_flops += k.flops;
  }
  for (auto op = layer.ops.rbegin(); op != layer.ops.rend(); ++op)
    bwd.insert(bwd.end(), op->backward.begin(), op->backward.end());
  std::string base = block ? "block" : layer.name;
  w.forward = table.get(base + ".fwd", std::move(fwd));
  w.backward = table.get(base + ".bwd", std::move(bwd));
  return w;
}

}  // namespace

Plan plan_data_parallel(const models::ModelGraph& g, const ParallelismSpec& p, const TrainingSpec& t) {
  if (p.tensor != 1 || p.pipeline != 1) throw std::invalid_argument("data-parallel plan needs tensor = pipeline = 1");
  const int dp = p.data;
  if (dp < 1 || t.global_batch % (static_cast<std::int64_t>(dp) * p.micro_batch) != 0)
    throw std::invalid_argument("global batch must be a multiple of data x micro_batch_size");

  Plan plan;
  TaskGraph& tg = plan.graph;
  tg.num_ranks = dp;
  plan.accumulation_steps = t.global_batch / (static_cast<std::int64_t>(dp) * p.micro_batch);

  WorkTable table(tg);
  std::vector<LayerWorks> works;
  double recompute_flops = 0;
  for (const auto& layer : g.layers) {
    works.push_back(layer_works(layer, p.recompute, table));
    recompute_flops += works.back().recompute_matmul_flops;
  }
  const double params = g.params();
  const int opt_work =
      table.get("optimizer", {models::optimizer_kernel(t.optimizer, params, mixed_precision(t.precision))});

  plan.buckets = make_buckets(g, grad_bytes_per_param(t.precision), p.bucket_bytes, p.first_bucket_bytes);
  std::vector<int> all_ranks(static_cast<std::size_t>(dp));
  for (int r = 0; r < dp; ++r) all_ranks[static_cast<std::size_t>(r)] = r;
  const int group = tg.add_group(all_ranks);

  const int num_layers = static_cast<int>(g.layers.size());
  std::vector<int> last(static_cast<std::size_t>(dp), -1);  // last task on each rank's compute stream
  auto chain = [&](int r) { return last[static_cast<std::size_t>(r)] < 0 ? std::vector<int>{} : std::vector<int>{last[static_cast<std::size_t>(r)]}; };
  // backward task of each layer on each rank in the last micro-batch: buckets wait on them
  std::vector<std::vector<int>> final_bwd(static_cast<std::size_t>(num_layers), std::vector<int>(static_cast<std::size_t>(dp), -1));

  // Micro-batches before the last one only accumulate gradients (DDP's no_sync): nothing
  // communicates, so each rank's run of them is one task.
  const std::int64_t quiet = plan.accumulation_steps - 1;
  if (quiet > 0) {
    std::vector<models::Kernel> kernels;
    for (const auto& w : works) {
      const auto& f = tg.works[static_cast<std::size_t>(w.forward)].kernels;
      kernels.insert(kernels.end(), f.begin(), f.end());
    }
    for (auto w = works.rbegin(); w != works.rend(); ++w) {
      const auto& b = tg.works[static_cast<std::size_t>(w->backward)].kernels;
      kernels.insert(kernels.end(), b.begin(), b.end());
    }
    const int acc = tg.add_work({"accumulate", std::move(kernels), static_cast<double>(quiet)});
    for (int r = 0; r < dp; ++r)
      last[static_cast<std::size_t>(r)] =
          tg.add_compute(r, acc, Category::Compute, "fwd+bwd x" + std::to_string(quiet) + " micro-batches", {});
  }
  const std::string tag = " mb" + std::to_string(quiet);
  for (int r = 0; r < dp; ++r) {
    for (int li = 0; li < num_layers; ++li)
      last[static_cast<std::size_t>(r)] =
          tg.add_compute(r, works[static_cast<std::size_t>(li)].forward, Category::Compute,
                         "fwd " + g.layers[static_cast<std::size_t>(li)].name + tag, chain(r));
    for (int li = num_layers - 1; li >= 0; --li) {
      int id = tg.add_compute(r, works[static_cast<std::size_t>(li)].backward, Category::Compute,
                              "bwd " + g.layers[static_cast<std::size_t>(li)].name + tag, chain(r));
      last[static_cast<std::size_t>(r)] = id;
      final_bwd[static_cast<std::size_t>(li)][static_cast<std::size_t>(r)] = id;
    }
  }

  // One communication stream: buckets go out in the order they become ready.
  int prev_comm = -1;
  for (std::size_t b = 0; b < plan.buckets.size(); ++b) {
    const auto& bucket = plan.buckets[b];
    int ready_layer = p.overlap_grad_reduce ? bucket.ready_after_layer : 0;
    std::vector<int> deps = final_bwd[static_cast<std::size_t>(ready_layer)];
    if (prev_comm >= 0) deps.push_back(prev_comm);
    if (dp > 1) {
      taskgraph::Collective c{taskgraph::CollectiveOp::AllReduce, p.algorithm, group, bucket.bytes};
      prev_comm = tg.add_collective(c, "all_reduce bucket " + std::to_string(b), std::move(deps));
    }
  }
  for (int r = 0; r < dp; ++r) {
    std::vector<int> deps = chain(r);
    if (prev_comm >= 0) deps.push_back(prev_comm);
    tg.add_compute(r, opt_work, Category::Optimizer, "optimizer", std::move(deps));
  }

  const double micro_batches = static_cast<double>(plan.accumulation_steps) * dp;
  plan.model_flops_per_step = g.model_flops() * micro_batches;
  plan.hardware_flops_per_step = plan.model_flops_per_step + recompute_flops * micro_batches;
  plan.memory = model_state_memory(params, t.precision, t.optimizer, p.zero_stage, dp);
  // In data parallelism one micro-batch is in flight at a time.
  plan.memory.activations = activation_bytes_per_micro_batch(g, p.recompute);
  return plan;
}

}  // namespace dtsim::strategies
