// Gradient buckets by priority (P3, Jayarajan et al. 2019; ByteScheduler, Peng et al. 2019):
// queued buckets holding earlier layers go first (one stream, ordered by the earliest layer each
// holds), each bucket's parameters are updated as soon as it is reduced, and the next step's
// forward runs each layer once its own update is done, so the first forward runs layer by layer.
#include <map>

#include "strategies/planner.hpp"
#include "strategies/settings.hpp"
#include "strategies/units/units.hpp"
#include "strategies/update_kernels.hpp"

namespace dtsim::strategies {

namespace {

class PriorityBuckets final : public Unit {
 public:
  explicit PriorityBuckets(const ParallelismSpec& p) : offload_(p.activation_offload) {}
  const char* name() const override { return "priority-buckets"; }

  bool splits(const PassKind& kind) const override { return kind.forward && kind.first; }
  void start_replica(Planner&) override { first_forward_.clear(); }
  // Each layer's first forward of the step (with activation offload, whose forwards all run layer
  // by layer, each micro-batch's in turn: the last one's stays).
  void after_layer(Planner&, Pass& pass, const models::Layer& l, int task) override {
    if (pass.kind.forward && (pass.kind.first || offload_)) first_forward_[&l] = task;
  }
  void end_replica(Planner&) override { replica_first_.push_back(first_forward_); }

  bool orders_buckets() const override { return true; }
  void after_bucket(Planner& em, int s, const Bucket& b, int task) override {
    auto& t = em.plan().graph.tasks[static_cast<std::size_t>(task)];
    t.stream = s;
    t.priority = b.ready_after_layer;  // the earliest layer the next forward needs
    if (s != stage_) buckets_.clear(), stage_ = s;
    buckets_.push_back(b);
    reduced_.push_back(task);
  }

  // One update per bucket and replica, as soon as its gradients are reduced; the next step's
  // forward of a layer waits for the updates of the buckets holding it.
  bool takes_step() const override { return true; }
  void step(Planner& em, int s) override;

  // One update per bucket and replica. Priority order is modelled on one stage (the scenario
  // loader refuses more); with several, each stage's step walks the buckets of the stage
  // synchronised last, as the planner always has.
  double tasks(const Count& c) const override {
    if (c.k.grad_ranks <= 1 || c.p.zero_stage == 3 || !c.k.sync) return 0;
    const auto last = sync_buckets(c.k.stage_layers(c.k.pipeline - 1), c.p, c.t.precision);
    return static_cast<double>(last.size()) * c.k.replicas * c.k.pipeline;
  }
  std::string replay_only(const ParallelismSpec&) const override { return "priority buckets"; }

 private:
  bool offload_;
  std::map<const models::Layer*, int> first_forward_;  // the replica being emitted
  std::vector<std::map<const models::Layer*, int>> replica_first_;
  std::vector<Bucket> buckets_;  // the buckets of the stage synchronised last
  int stage_ = -1;
  std::vector<int> reduced_;     // each bucket's collective, every stage's in turn
};

void PriorityBuckets::step(Planner& em, int s) {
  // No buckets (ZeRO-3 reduce-scatters instead, or one data rank): nothing to update bucket by
  // bucket, and its count (tasks) is 0 too. This used to read updates.back() of an empty list.
  if (buckets_.empty()) return;
  const Layers mine = em.shape().stage_layers(s);
  const auto& t = em.training();
  const double gbytes = wire_grad_bytes(em.spec(), t.precision);
  auto& graph = em.plan().graph;
  auto& replica_last = em.replica_last();
  for (std::size_t d = 0; d < replica_last.size(); ++d) {
    em.set_replica(static_cast<int>(d));
    std::vector<int> updates;
    for (std::size_t b = 0; b < buckets_.size(); ++b) {
      taskgraph::Work w;
      w.name = "optimizer";
      w.kernels = update_kernels(em.spec(), t, buckets_[b].bytes / gbytes);
      std::vector<int> deps{reduced_[b], replica_last[d][static_cast<std::size_t>(s)]};
      updates.push_back(graph.add_compute(em.gpu(s), em.works().get(w), taskgraph::Category::Optimizer, "optimizer bucket " + std::to_string(b), deps));
      graph.tasks[static_cast<std::size_t>(updates.back())].off_step_order = true;
    }
    for (std::size_t b = 0; b < buckets_.size(); ++b)
      for (int li = buckets_[b].ready_after_layer; li <= buckets_[b].first_layer; ++li) {
        const int fwd = replica_first_[d].at(mine[static_cast<std::size_t>(li)]);
        graph.tasks[static_cast<std::size_t>(fwd)].after_previous_step.push_back(updates[b]);
      }
    replica_last[d][static_cast<std::size_t>(s)] = updates.back();
  }
}

}  // namespace

std::unique_ptr<Unit> make_priority_buckets(const ParallelismSpec& p) { return std::make_unique<PriorityBuckets>(p); }

}  // namespace dtsim::strategies
