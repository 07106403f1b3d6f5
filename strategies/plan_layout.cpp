#include <algorithm>
#include <stdexcept>

#include "strategies/planner.hpp"

namespace dtsim::strategies {

// What run() and layout() decide alike before the passes, beyond the layout: each chunk's kept
// activations, the ranks.
void Planner::start_layout() {
  plan_.micro_batches = k_.micro_batches;
  plan_.graph.num_ranks = k_.gpus();
  chunk_kept_.clear();
  for (const auto& layers : k_.chunk_layers) chunk_kept_.push_back(k_.checkpoints.kept(layers));
}

// The same checks and decisions as run() up to the passes, then finish()'s memory and FLOPs:
// nothing here may differ from run(), or closed-form estimates and replays would disagree on
// what fits.
PlanLayout Planner::layout() {
  const int P = p_.pipeline;
  start_layout();
  seq_.resize(static_cast<std::size_t>(P));
  for (int s = 0; s < P; ++s) {
    // The memory walk's peak in closed form where the schedule has one (equal to the walk's,
    // tests/test_schedule_peak.cpp); only then is the schedule not spelled out.
    const int v = p_.schedule->chunked ? k_.virtual_stages : 1;
    std::vector<double> kept;
    for (int c = 0; c < v && (c + 1) * P <= k_.chunks; ++c) kept.push_back(chunk_kept(c, s));
    known_peak_.push_back(peak_in_flight(p_.schedule, P, s, static_cast<int>(k_.micro_batches), kept));
    if (!known_peak_.back())
      seq_[static_cast<std::size_t>(s)] = stage_schedule(p_.schedule, P, s, static_cast<int>(k_.micro_batches), k_.virtual_stages);
    const Layers& mine = stage_layers(s);
    plan_.stage_layers.push_back(static_cast<int>(
        std::count_if(mine.begin(), mine.end(), [](const models::Layer* l) { return l->kind == models::LayerKind::Block && !l->mtp; })));
  }
  if (!k_.sync && (P > 1 || p_.tensor > 1 || p_.zero_stage > 0))
    throw std::invalid_argument("asynchronous updates are modelled for pure data parallelism only");
  plan_.replicas = k_.replicas;
  plan_.iterations_per_step = k_.iterations;
  return {k_, finish()};
}

PlanLayout plan_layout(const models::ModelGraph& g, const ParallelismSpec& p, const TrainingSpec& t, const HostSpec& host) {
  return Planner(g, layout_of(g, p, t), p, t, host).layout();
}

}  // namespace dtsim::strategies
