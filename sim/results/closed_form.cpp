#include "sim/results/closed_form.hpp"

#include <algorithm>
#include <utility>

#include "sim/config/build_options.hpp"
#include "sim/cost/comm_interference.hpp"
#include "sim/network/collectives.hpp"
#include "sim/results/closed_form_impl.hpp"
#include "sim/results/inline_comm.hpp"
#include "sim/results/torus_layout.hpp"
#include "strategies/works.hpp"

namespace dtsim::results {

ClosedForm::Impl::Impl(const config::Scenario& s) : base(s), platform(laid_out_cluster(s)), dtype(config::compute_dtype(s.training.precision)) {
  params = s.model.build(config::whole_model_options(s)).params();
}

const ClosedForm::Impl::Graph& ClosedForm::Impl::graph(const config::Scenario& s) {
  const auto& p = s.parallelism;
  auto& slot = graphs[{p.micro_batch, p.tensor, p.sequence_parallel}];
  // Keyed by what varies between the strategies the closed form knows (closed_form_gap: no
  // context or expert parallelism, no FP8).
  if (!slot.graph) {
    slot.graph = std::make_unique<models::ModelGraph>(s.model.build(config::build_options(s)));
    find_twins(*slot.graph);
    // The micro-batch sizes only scale activations: graphs of one tensor split hold the same
    // parameters, op by op, and so fill the same gradient buckets.
    slot.param_set = param_sets.try_emplace({p.tensor, p.sequence_parallel}, static_cast<int>(param_sets.size())).first->second;
  }
  return slot;
}

// Layers that differ only by name (a transformer's blocks) price alike: the first of each
// kind stands for the others in the layer cache, so a 96-block model prices one block.
// The names are set aside while the layers are compared, so nothing is copied.
void ClosedForm::Impl::find_twins(models::ModelGraph& g) {
  std::vector<std::string> names;
  for (auto& l : g.layers) names.push_back(std::exchange(l.name, {}));
  std::vector<const models::Layer*> firsts;
  for (const auto& l : g.layers) {
    auto same = std::find_if(firsts.begin(), firsts.end(), [&](const models::Layer* f) { return *f == l; });
    twin[&l] = same == firsts.end() ? firsts.emplace_back(&l) : *same;
  }
  for (std::size_t i = 0; i < names.size(); ++i) g.layers[i].name = std::move(names[i]);
}

double ClosedForm::Impl::layer_seconds(const models::Layer& l, bool forward, const models::ModelGraph& g,
                                       const strategies::ParallelismSpec& p, const strategies::Checkpoints& ck, strategies::Recompute how,
                                       int where, int tp_base) {
  auto [it, fresh] = layers.try_emplace(LayerKey{twin.at(&l), forward, static_cast<int>(how), p.fused_grad_accumulation, where}, 0.0);
  if (!fresh) return it->second;
  const closed_form_detail::Layers one{&l};
  const auto w = forward ? strategies::forward_work(one, g, p, 0) : strategies::backward_work(one, g, p, 0, {}, &ck);
  double s = 0;
  for (const auto& k : w.kernels) s += cost::quote_kernel(base.device, k, dtype).seconds;
  s *= w.repeat;
  for (const auto& c : w.comms) {
    // Blocks of one size and their recomputed forwards share these: lowered once.
    auto alone = [&](double bytes) {
      auto [at, first] = inline_times.try_emplace(
          CollectiveKey{5, static_cast<double>(c.op), bytes, static_cast<double>(where), static_cast<double>(p.tensor)}, 0.0);
      if (first) {
        std::vector<int> ranks(static_cast<std::size_t>(p.tensor));
        for (int t = 0; t < p.tensor; ++t) ranks[static_cast<std::size_t>(t)] = tp_base + t;
        at->second = network::inline_time(platform, {c.op, c.group, bytes, 1.0}, ranks);
      }
      return at->second;
    };
    // As simulate() prices them (inline_comm.hpp), overlap included.
    const double kernel = c.hidden_by < 0 ? 0.0 : cost::quote_kernel(base.device, w.kernels[static_cast<std::size_t>(c.hidden_by)], dtype).seconds;
    const auto one = inline_cost(c, c.count * alone(c.bytes), alone, kernel, cost::sm_share(base.device, c.margin_sms));
    s += one.exposed + one.interference;
  }
  it->second = s + w.fixed_seconds;
  return it->second;
}

ClosedForm::ClosedForm(const config::Scenario& base) : impl_(std::make_unique<Impl>(base)) {}
ClosedForm::~ClosedForm() = default;

Result ClosedForm::estimate(const config::Scenario& s) {
  auto& im = *impl_;
  const auto& p = s.parallelism;
  const auto& t = s.training;
  Result r;
  r.scenario_spec = s;
  r.scenario = s.name;
  r.gpus = s.cluster.num_gpus();
  r.params = im.params;
  const auto& graph = im.graph(s);
  auto laid = strategies::plan_layout(*graph.graph, p, t, s.host);
  adopt_plan(r, std::move(laid.plan), s);

  Impl::Step step(im, s, graph, laid.layout);
  step.price_passes();
  step.price_hops();
  step.stage_totals();
  const bool zero3 = p.zero_stage == 3 && step.D > 1;
  r.step_time_s = zero3 ? step.zero3_step() : step.pipeline_step();
  const double samples = static_cast<double>(t.global_batch) * r.plan.iterations_per_step;
  r.samples_per_s = samples / r.step_time_s;
  r.tokens_per_s = r.samples_per_s * static_cast<double>(s.model.tokens_per_sample());
  const double peak = s.device.peak_flops.at(im.dtype);
  r.model_tflops_per_gpu = r.model_flops / (r.step_time_s * r.gpus) / 1e12;
  r.mfu = r.model_flops / (r.step_time_s * r.gpus * peak);
  r.hfu = r.hardware_flops / (r.step_time_s * r.gpus * peak);
  if (s.faults.enabled) r.faults = faults::analyse_faults(s.faults, r.gpus, s.cluster.nodes, r.step_time_s, s.steps);
  r.capacity = capacity_plan(r);
  return r;
}

}  // namespace dtsim::results
