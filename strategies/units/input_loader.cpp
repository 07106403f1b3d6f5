// The data loader feeding each GPU (ParallelismSpec::input): a load task per micro-batch on the
// loader's own stream, which the first chunk's forward waits for. The loader runs ahead of the
// GPU without bound, one load after the other: a step's first starts when the previous step's last
// ends.
#include "strategies/planner.hpp"
#include "strategies/units/units.hpp"

namespace dtsim::strategies {

namespace {

class InputLoader final : public Unit {
 public:
  explicit InputLoader(const ParallelismSpec& p) : on_(p.input.enabled) {}
  const char* name() const override { return "input-loader"; }

  void start_replica(Planner&) override { last_ = first_ = -1; }

  // Every micro-batch is loaded, the first of a step too.
  void before_pass(Planner& em, Pass& pass) override {
    if (!on_ || !pass.kind.forward || pass.chunk != 0) return;
    if (work_ < 0) {
      taskgraph::Work w;
      w.name = "load micro-batch";
      w.fixed_seconds = em.spec().input.seconds(em.spec().micro_batch);
      work_ = em.works().get(std::move(w));
    }
    std::vector<int> deps;
    if (last_ >= 0) deps.push_back(last_);
    auto& graph = em.plan().graph;
    const int load = graph.add_compute(em.gpu(pass.stage), work_, taskgraph::Category::Input, "load" + pass.tag, deps);
    graph.tasks[static_cast<std::size_t>(load)].off_step_order = true;  // it waits for loads alone
    if (last_ < 0) first_ = load;
    last_ = load;
    pass.cross.push_back(load);
  }

  // The next step's first load follows this step's last.
  void end_replica(Planner& em) override {
    if (first_ >= 0) em.plan().graph.tasks[static_cast<std::size_t>(first_)].after_previous_step.push_back(last_);
  }

  // One load per micro-batch, replica and local step.
  double tasks(const Count& c) const override {
    return on_ ? static_cast<double>(c.k.micro_batches) * c.per_replica() : 0.0;
  }
  std::string replay_only(const ParallelismSpec&) const override { return "input pipeline"; }

 private:
  bool on_;
  int work_ = -1;            // one micro-batch's load
  int last_ = -1, first_ = -1;  // the replica's loads of the step
};

}  // namespace

std::unique_ptr<Unit> make_input_loader(const ParallelismSpec& p) { return std::make_unique<InputLoader>(p); }

}  // namespace dtsim::strategies
