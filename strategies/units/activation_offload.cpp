// Activation offload (Megatron-Core cpu offloading, DeepSpeed cpu_checkpointing, torch
// save_on_cpu): each layer's saved activations go to host memory over PCIe after its forward and
// come back before its backward, on their own stream beside the compute (overlapped) or on the
// compute stream, which waits for them. Passes run layer by layer so each copy can follow its layer.
#include <map>
#include <tuple>

#include "strategies/memory.hpp"
#include "strategies/planner.hpp"
#include "strategies/units/units.hpp"

namespace dtsim::strategies {

namespace {

class ActivationOffload final : public Unit {
 public:
  explicit ActivationOffload(const ParallelismSpec& p) : on_(p.activation_offload) {}
  const char* name() const override { return "activation-offload"; }

  bool splits(const PassKind&) const override { return on_; }

  // Each replica sends and fetches its own activations: a later replica's backward of the previous
  // step's micro-batch must not fetch what an earlier replica's forward sent (a cycle through the
  // collectives the replicas join).
  void start_replica(Planner&) override { down_.clear(); }

  // After a layer's forward, its saved activations go to the host.
  void after_layer(Planner& em, Pass& pass, const models::Layer& l, int task) override {
    if (!on_ || !pass.kind.forward) return;
    const double bytes = em.shape().checkpoints.kept({&l});
    if (bytes <= 0) return;
    const int mb = pass.op->micro_batch;
    const int id = em.pcie_copy(pass.stage, bytes, {task}, true, "offload act " + l.name + label(pass.chunk, mb));
    down_[{pass.chunk, mb, &l}] = id;
    if (!em.spec().framework.activation_offload_overlapped) em.compute_stream(pass.stage) = id;
  }

  // Before a layer's backward its activations come back: prefetched while the layer before it
  // runs (overlapped), or when the compute stream reaches it. A backward of the previous step's
  // micro-batch finds none sent down yet (its forward comes later in the window) and fetches none.
  void before_layer(Planner& em, Pass& pass, const models::Layer& l, std::vector<int>& deps) override {
    if (!on_ || pass.kind.forward) return;
    const int mb = pass.op->micro_batch;
    const auto down = down_.find({pass.chunk, mb, &l});
    if (down == down_.end()) return;
    std::vector<int> after{down->second};
    const bool overlapped = em.spec().framework.activation_offload_overlapped;
    const int issue = overlapped ? em.previous_compute(pass.stage) : em.compute_stream(pass.stage);
    if (issue >= 0) after.push_back(issue);
    const int id = em.pcie_copy(pass.stage, em.shape().checkpoints.kept({&l}), after, false,
                                "fetch act " + l.name + label(pass.chunk, mb));
    deps.push_back(id);
    if (!overlapped) em.compute_stream(pass.stage) = id;
  }

  // Two copies per layer holding activations and micro-batch, on every replica; the previous
  // step's backwards fetch nothing (their forwards ran in a step not simulated).
  double tasks(const Count& c) const override {
    if (!on_) return 0;
    double n = 0;
    for (int j = 0; j < c.k.chunks; ++j) {
      double layers = 0;
      for (const auto* l : c.k.chunk_layers[static_cast<std::size_t>(j)]) layers += c.k.checkpoints.kept({l}) > 0 ? 1 : 0;
      for (const auto& [kind, count] : pass_kinds(c.p.schedule, c.k.pipeline, c.k.stage_of(j), c.k.micro_batches)) {
        if (kind.part == PipeOp::Part::Weight) continue;
        if (kind.previous_step) continue;
        n += c.per_replica() * static_cast<double>(count) * layers;
      }
    }
    return n;
  }
  std::string replay_only(const ParallelismSpec&) const override { return "activation offload"; }

 private:
  static std::string label(int chunk, int micro_batch) {
    return " c" + std::to_string(chunk) + " mb" + std::to_string(micro_batch);
  }
  bool on_;
  std::map<std::tuple<int, int, const models::Layer*>, int> down_;  // (chunk, micro-batch, layer) -> copy to host
};

}  // namespace

std::unique_ptr<Unit> make_activation_offload(const ParallelismSpec& p) { return std::make_unique<ActivationOffload>(p); }

}  // namespace dtsim::strategies
