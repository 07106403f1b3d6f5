// Asynchronous data parallelism (ParallelismSpec::updates): every worker has its own tasks and
// exchanges with the shared weights on its own time, with no synchronous step. Async and Hogwild
// push the gradients and pull the weights the servers (or host memory) updated with them; EASGD
// steps locally between exchanges, then sends its fp32 weights to the centre and gets the elastic
// difference back, one worker after another. The worker then takes the new weights in.
#include "strategies/planner.hpp"
#include "strategies/units/units.hpp"
#include "strategies/update_kernels.hpp"

namespace dtsim::strategies {

namespace {

class AsyncUpdates final : public Unit {
 public:
  explicit AsyncUpdates(const ParallelismSpec& p) : easgd_(p.updates == Updates::Easgd) {}
  const char* name() const override { return "async-updates"; }

  // EASGD's local steps: the worker's own optimizer step between its iterations.
  void before_passes(Planner& em, int iteration) override {
    if (iteration > 0) local_optimizer(em);
  }
  void end_replica(Planner& em) override;

  // Per worker: its local steps between iterations, its exchange and the weights taken in (EASGD
  // steps once more before the exchange).
  double tasks(const Count& c) const override {
    return c.k.replicas * ((c.k.iterations - 1) + (easgd_ ? 3.0 : 2.0));
  }
  // Each worker's exchange: against every server shard (or host memory), one at a time.
  CollectiveCounts collectives(const Count& c) const override {
    return {{CollectiveOp::AllReduce, c.p.algorithm, GroupKind::Servers, static_cast<double>(c.k.replicas)}};
  }
  std::string replay_only(const ParallelismSpec&) const override { return "asynchronous updates"; }

 private:
  static void local_optimizer(Planner& em) {
    taskgraph::Work w;
    w.name = "optimizer";
    w.kernels = update_kernels(em.spec(), em.training(), layer_params(em.shape().stage_layers(0)));
    int& last = em.compute_stream(0);
    last = em.plan().graph.add_compute(em.gpu(0), em.works().get(w), taskgraph::Category::Optimizer, "optimizer", {last});
  }
  bool easgd_;
  int previous_exchange_ = -1;  // EASGD's workers take turns with the centre
};

// The replica's exchange with the shared weights, after its passes.
void AsyncUpdates::end_replica(Planner& em) {
  const auto& t = em.training();
  const double params = layer_params(em.shape().stage_layers(0));
  if (easgd_) local_optimizer(em);
  int& last = em.compute_stream(0);
  std::vector<int> deps{last};
  if (easgd_ && previous_exchange_ >= 0) deps.push_back(previous_exchange_);
  const double gbytes = easgd_ ? 4.0 : grad_bytes_per_param(t.precision);
  taskgraph::Collective c{CollectiveOp::AllReduce, em.spec().algorithm, em.data_groups(0), params * gbytes, em.gpu(0)};
  // A dedicated server applies the update to its shard: the optimizer reads the gradient and
  // reads and writes its state (Adam: fp32 weights, m, v); EASGD's centre reads the worker's
  // weights and its own and writes its own.
  const double state = optimizer_bytes_per_param(t.precision, t.optimizer) + (mixed_precision(t.precision) ? 0.0 : 4.0);
  c.server_apply_factor = easgd_ ? 3.0 : (gbytes + 2.0 * state) / gbytes;
  auto& graph = em.plan().graph;
  const int id = graph.add_collective(std::move(c), easgd_ ? "exchange with centre" : "push and pull", deps);
  previous_exchange_ = id;
  taskgraph::Work w;
  w.name = easgd_ ? "elastic update" : "take new weights";
  // EASGD moves its weights toward the centre: read both, write its own (fp32).
  if (easgd_) w.kernels = {models::Kernel{"elastic_update", models::KernelKind::Memory, 1, 0, 0, 0, 3.0 * params, 12.0 * params}};
  last = graph.add_compute(em.gpu(0), em.works().get(w), taskgraph::Category::Optimizer, w.name, {id, last});
  em.replica_last().back()[0] = last;
}

}  // namespace

std::unique_ptr<Unit> make_async_updates(const ParallelismSpec& p) { return std::make_unique<AsyncUpdates>(p); }

}  // namespace dtsim::strategies
