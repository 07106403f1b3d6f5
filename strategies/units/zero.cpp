#include "strategies/units/zero.hpp"

#include <algorithm>

#include "strategies/planner.hpp"
#include "strategies/units/units.hpp"

namespace dtsim::strategies {

namespace {

double expert_params(const Layers& ls) {
  double e = 0;
  for (const auto* l : ls) e += l->expert_params();
  return e;
}

class Zero final : public Unit {
 public:
  explicit Zero(const ParallelismSpec& p)
      : stage_(p.zero_stage),
        sharded_(p.data * p.context > 1),
        zero3_(p.zero_stage == 3 && sharded_ && p.framework.framework == Framework::MegatronLM),
        staged_(zero3_ && p.pipeline > 1),
        overlapped_(p.overlap_param_gather && gathers_params()) {}

  const char* name() const override { return "zero"; }

  bool splits(const PassKind& kind) const override {
    return (zero3_ && (!staged_ || gathers_in(kind))) || (overlapped_ && gathers_in(kind));
  }

  // ZeRO-3 gathers a layer's parameters on the communication stream before the layer runs; under
  // expert parallelism its experts' come from the expert-data-parallel group (plan_experts.cpp).
  void before_layer(Planner& em, Pass& pass, const models::Layer& l, std::vector<int>& deps) override {
    if (overlapped_ && gathers_in(pass.kind)) {
      if (const int g = overlapped_gather(em, pass, l); g >= 0) deps.push_back(g);
      return;
    }
    if (!zero3_ || (staged_ && !gathers_in(pass.kind))) return;
    const int g = layer_collective(em, pass, CollectiveOp::AllGather, l, weight_bytes_per_param(em.training().precision), -1);
    if (g >= 0) deps.push_back(g);
  }

  // ZeRO-3 reduce-scatters a layer's gradients as soon as its backward produced them.
  void after_layer(Planner& em, Pass& pass, const models::Layer& l, int task) override {
    if (!zero3_ || staged_ || pass.kind.forward) return;
    layer_collective(em, pass, CollectiveOp::ReduceScatter, l, reduce_bytes(em), task);
  }

  // ZeRO-2 keeps only its shard of the gradients, so every micro-batch but the last reduces them.
  void after_backward(Planner& em, Pass& pass, int last, bool split) override {
    if (staged_ && pass.kind.final) {
      // Inside a pipeline stage FSDP2 accumulates unsharded gradients over the micro-batches and
      // reduces them once the stage's last backward is done (torch/distributed/pipelining/stage.py:
      // set_requires_gradient_sync(False) in every backward, then _post_backward's post_backward
      // of every FSDP unit), last layer first.
      const Layers& layers = *pass.layers;
      for (auto l = layers.rbegin(); l != layers.rend(); ++l)
        layer_collective(em, pass, CollectiveOp::ReduceScatter, **l, reduce_bytes(em), last);
      return;
    }
    if (!reduces_after(pass.kind, split)) return;
    const double gbytes = grad_bytes_per_param(em.training().precision);
    const Layers& layers = *pass.layers;
    if (split && em.spec().expert > 1) {
      const double experts = expert_params(layers);
      em.dense_and_expert_collective(pass.stage, CollectiveOp::ReduceScatter, layer_params(layers) - experts, experts, gbytes, last,
                                     "zero2 reduce" + pass.tag, "zero2 reduce experts" + pass.tag);
      return;
    }
    std::vector<int> deps{last};
    int& comm = em.comm_stream(pass.stage);
    if (comm >= 0) deps.push_back(comm);
    comm = em.group_collective(pass.stage, CollectiveOp::ReduceScatter, em.data_groups(pass.stage), layer_params(layers) * gbytes, deps,
                               "zero2 reduce" + pass.tag);
  }

  // ZeRO-1 and ZeRO-2: every GPU gathers the parameters the others of its group updated.
  void after_optimizer(Planner& em, int s, const std::vector<int>& deps) override {
    if (!gathers_params() || overlapped_) return;
    const Layers mine = em.shape().stage_layers(s);
    const double experts = em.spec().expert > 1 ? expert_params(mine) : 0.0;
    em.collective(CollectiveOp::AllGather, em.data_groups(s), dense_gather_bytes(em, mine, layer_params(mine) - experts), deps,
                  "zero gather params");
    // Under expert parallelism the experts' come from the expert-data-parallel group.
    if (em.spec().expert > 1 && em.shape().expert_data > 1)
      em.collective(CollectiveOp::AllGather, em.expert_data_groups(s), experts * weight_bytes_per_param(em.training().precision), deps,
                    "zero gather expert params");
  }

  // Every task it emits is a collective: over the data-parallel groups, and the experts' halves
  // over the expert-data-parallel groups.
  double tasks(const Count& c) const override {
    double n = 0;
    for (const auto& x : collectives(c)) n += x.count;
    return n;
  }
  CollectiveCounts collectives(const Count& c) const override {
    double gather = 0, reduce = 0, expert_gather = 0, expert_reduce = 0;  // per replica
    for (int j = 0; j < c.k.chunks; ++j) {
      const Layers& layers = c.k.chunk_layers[static_cast<std::size_t>(j)];
      for (const auto& [kind, count] : pass_kinds(c.p.schedule, c.k.pipeline, c.k.stage_of(j), c.k.micro_batches)) {
        const double n = static_cast<double>(count);
        if (zero3_ && kind.part != PipeOp::Part::Weight)
          for (const auto* l : layers) {
            const double x = expert_piece(c, l->expert_params());
            const bool gathers = staged_ ? gathers_in(kind) : true;  // before the forward, and before the backward
            const bool reduces = staged_ ? !kind.forward && kind.final : !kind.forward;
            if (gathers) gather += n, expert_gather += n * x;
            if (reduces) reduce += n, expert_reduce += n * x;
          }
        if (overlapped_ && gathers_in(kind))
          for (const auto* l : layers)
            if (l->params() > 0) gather += n, expert_gather += n * expert_piece(c, l->expert_params());
        if (reduces_after(kind, c.split(kind))) {
          reduce += n;
          if (c.split(kind) && c.p.expert > 1) expert_reduce += n * expert_piece(c, expert_params(layers));
        }
      }
    }
    const double times = c.per_collective();
    if (hybrid_shard(c.p)) {  // experts are refused with HSDP; ZeRO-1/2 do not shard in groups
      const double in_shard = c.k.shard_ranks > 1 ? times : 0;
      return {{CollectiveOp::AllGather, c.p.algorithm, GroupKind::Shard, gather * in_shard},
              {CollectiveOp::ReduceScatter, c.p.algorithm, GroupKind::Shard, reduce * in_shard},
              {CollectiveOp::AllReduce, c.p.algorithm, GroupKind::Replicate, reduce * times}};
    }
    CollectiveCounts out{{CollectiveOp::AllGather, c.p.algorithm, GroupKind::Data, gather * times},
                         {CollectiveOp::ReduceScatter, c.p.algorithm, GroupKind::Data, reduce * times},
                         {CollectiveOp::AllGather, c.p.algorithm, GroupKind::ExpertData, expert_gather * times},
                         {CollectiveOp::ReduceScatter, c.p.algorithm, GroupKind::ExpertData, expert_reduce * times}};
    if (gathers_params() && !overlapped_ && c.k.sync && !c.p.schedule->updates_per_backward && !c.p.priority_buckets) {
      out.push_back({CollectiveOp::AllGather, c.p.algorithm, GroupKind::Data, static_cast<double>(c.k.pipeline)});
      if (c.p.expert > 1 && c.k.expert_data > 1)
        out.push_back({CollectiveOp::AllGather, c.p.algorithm, GroupKind::ExpertData, static_cast<double>(c.k.pipeline)});
    }
    return out;
  }

  std::string replay_only(const ParallelismSpec& p) const override {
    if (p.zero_stage != 0 && p.zero_stage != 1 && p.zero_stage != 3) return "ZeRO stage";
    if (p.zero_stage == 3 && p.pipeline > 1 && p.data > 1) return "ZeRO-3 with pipeline parallelism";
    // HSDP's term (sim/results/closed_form.cpp) has every layer gathered; full replicas gather none.
    if (hybrid_shard(p) && p.shard_size * p.context == 1) return "hybrid sharding without shards (shard_size 1)";
    return "";
  }

 private:
  // Inside a pipeline stage FSDP2 is applied with reshard_after_forward False (torchtitan's
  // apply_fsdp, "default" policy under pipeline parallelism) and the schedule keeps every
  // backward from resharding (stage.py, set_reshard_after_backward(False)): each layer is gathered
  // before the first micro-batch's forward and stays gathered to the end of the step.
  static bool gathers_in(const PassKind& kind) { return kind.forward && kind.first; }
  // One layer's gather or reduce-scatter: in HSDP's shard groups (the reduce-scatter followed by
  // the all-reduce across replicas), or over the data-parallel groups with the experts' over
  // theirs. Returns the last task, -1 for none.
  // ZeRO-3's reduce-scatters carry the gradients' dtype unless the stack reduces in another
  // (FrameworkSpec::reduce_bytes: torchtitan's FSDP2 in fp32).
  static double reduce_bytes(const Planner& em) {
    const int r = em.spec().framework.reduce_bytes;
    return r > 0 ? r : grad_bytes_per_param(em.training().precision);
  }

  static int layer_collective(Planner& em, const Pass& pass, CollectiveOp op, const models::Layer& l, double bytes_per_param, int after) {
    const std::string what = op == CollectiveOp::AllGather ? "gather " : "reduce ";
    if (hybrid_shard(em.spec()))
      return em.zero3_collective(pass.stage, op, l.params(), bytes_per_param, after, "zero3 " + what + l.name + pass.tag);
    const double experts = em.spec().expert > 1 ? l.expert_params() : 0.0;
    return em.dense_and_expert_collective(pass.stage, op, l.params() - experts, experts, bytes_per_param, after,
                                          "zero3 " + what + l.name + pass.tag, "zero3 " + what + "experts of " + l.name + pass.tag);
  }
  // Megatron-Core's overlapped gather (--overlap-param-gather; megatron/core/distributed/
  // distributed_data_parallel.py, param_and_grad_buffer.py finish_param_sync): the first forward's
  // pre-hook of each module waits for its bucket's all-gather, then dispatches the next bucket's;
  // the host runs ahead of the GPU, so the gathers queue on the communication stream in forward
  // order and each layer's first forward waits only for its own. Layer by layer here, not by
  // bucket: a gather per layer with parameters, its experts' over the expert-data-parallel group.
  static int overlapped_gather(Planner& em, const Pass& pass, const models::Layer& l) {
    if (l.params() <= 0) return -1;
    const double experts = em.spec().expert > 1 ? l.expert_params() : 0.0, dense = l.params() - experts;
    // Per parameter, as the gather of the dense ones carries them (FP8 ones in a byte each).
    const double per_param = dense > 0 ? dense_gather_bytes(em, {&l}, dense) / dense : weight_bytes_per_param(em.training().precision);
    return em.dense_and_expert_collective(pass.stage, CollectiveOp::AllGather, dense, experts, per_param, -1,
                                          "zero gather " + l.name + pass.tag, "zero gather experts of " + l.name + pass.tag);
  }
  // The bytes ZeRO-1/2's gather of `dense` parameters of `layers` carries: the weights' dtype, but
  // Megatron's FP8 parameters as they are kept, one byte each (the loader refuses them with experts).
  static double dense_gather_bytes(const Planner& em, const Layers& layers, double dense) {
    const double wbytes = weight_bytes_per_param(em.training().precision);
    double bytes = dense * wbytes;
    if (em.training().memory.fp8_weight_copies == Fp8WeightCopies::Fp8Params) bytes -= fp8_weight_params(layers) * (wbytes - 1.0);
    return bytes;
  }
  bool reduces_after(const PassKind& kind, bool split) const {
    return stage_ == 2 && sharded_ && !kind.forward && !kind.final && (split || kind.part != PipeOp::Part::Input);
  }
  bool gathers_params() const { return (stage_ == 1 || stage_ == 2) && sharded_; }
  // A collective over a layer's parameters is the dense part, then the experts' over their own
  // groups where there are experts and more than one GPU holds each (dense_and_expert_collective).
  static double expert_piece(const Count& c, double experts) {
    return c.p.expert > 1 && experts > 0 && c.k.expert_data > 1 ? 1 : 0;
  }

  int stage_;
  bool sharded_, zero3_, staged_, overlapped_;
};

}  // namespace

std::unique_ptr<Unit> make_zero(const ParallelismSpec& p) { return std::make_unique<Zero>(p); }

double zero1_stage_end(double step_start, double optimizer_seconds, double gather_seconds) {
  return step_start + optimizer_seconds + gather_seconds;
}

double overlapped_gather_delay(const std::vector<double>& gather, const std::vector<double>& forward) {
  double gathered = 0, computed = 0, delay = 0;
  for (std::size_t i = 0; i < gather.size() && i < forward.size(); ++i) {
    gathered += gather[i];
    delay = std::max(delay, gathered - computed);
    computed += forward[i];
  }
  return delay;
}

double zero3_step_seconds(const Zero3Prices& z) {
  double comm = 0, comp = 0;
  const std::size_t n = z.gather.size();
  for (std::int64_t k = 0; k < z.micro_batches; ++k) {
    for (std::size_t i = 0; i < n; ++i) {
      comm += z.gather[i];
      comp = std::max(comp, comm) + z.forward[i];
    }
    for (std::size_t i = n; i-- > 0;) {
      comm += z.gather[i];
      comp = std::max(comp, comm) + z.backward[i];
      comm = comp + z.reduce[i];
    }
  }
  return std::max(comm, comp) + z.optimizer;
}

}  // namespace dtsim::strategies
