#include <algorithm>
#include <stdexcept>

#include "strategies/planner.hpp"

namespace dtsim::strategies {

// The same checks and decisions as run() up to the passes, then finish()'s memory and FLOPs:
// nothing here may differ from run(), or closed-form estimates and replays would disagree on
// what fits.
Layout Planner::layout() {
  const int P = p_.pipeline;
  start_layout();
  seq_.resize(static_cast<std::size_t>(P));
  for (int s = 0; s < P; ++s) {
    seq_[static_cast<std::size_t>(s)] = stage_schedule(p_.schedule, P, s, static_cast<int>(m_), v_);
    const Layers mine = stage_layers(s);
    plan_.stage_layers.push_back(static_cast<int>(
        std::count_if(mine.begin(), mine.end(), [](const models::Layer* l) { return l->kind == models::LayerKind::Block; })));
  }
  const bool sync = p_.updates == Updates::Sync;
  if (!sync && (P > 1 || p_.tensor > 1 || p_.zero_stage > 0))
    throw std::invalid_argument("asynchronous updates are modelled for pure data parallelism only");
  plan_.replicas = p_.all_replicas || !sync ? p_.data : 1;
  plan_.iterations_per_step = p_.updates == Updates::Easgd ? p_.easgd_period : 1;
  Layout out;
  out.chunks = chunk_layers_;
  out.plan = finish();
  return out;
}

Layout plan_layout(const models::ModelGraph& g, const ParallelismSpec& p, const TrainingSpec& t, const HostSpec& host) {
  return Planner(g, p, t, host).layout();
}

}  // namespace dtsim::strategies
