#include <algorithm>
#include <stdexcept>

#include "strategies/planner.hpp"

namespace dtsim::strategies {

// Model chunks in model order: blocks split evenly (the first chunks take one more when they do
// not divide) unless `blocks` gives each chunk's count, the embedding on the first chunk and the
// head on the last. Chunk c is on stage c % P.
std::vector<Layers> split_chunks(const models::ModelGraph& g, int chunks, const std::vector<int>& blocks_per_chunk) {
  Layers blocks;
  const models::Layer *embedding = nullptr, *head = nullptr;
  for (const auto& l : g.layers) {
    if (l.kind == models::LayerKind::Embedding) embedding = &l;
    else if (l.kind == models::LayerKind::Head) head = &l;
    else blocks.push_back(&l);
  }
  const std::size_t n = static_cast<std::size_t>(chunks);
  if (blocks.size() < n) throw std::invalid_argument("more model chunks than transformer blocks");
  std::vector<Layers> out(n);
  std::size_t next = 0;
  for (std::size_t c = 0; c < n; ++c) {
    std::size_t count = blocks.size() / n + (c < blocks.size() % n ? 1 : 0);
    if (!blocks_per_chunk.empty()) count = static_cast<std::size_t>(blocks_per_chunk.at(c));
    if (next + count > blocks.size()) throw std::invalid_argument("stage layers add up to more than the model's blocks");
    if (c == 0 && embedding) out[c].push_back(embedding);
    for (std::size_t i = 0; i < count; ++i) out[c].push_back(blocks[next++]);
    if (c + 1 == n && head) out[c].push_back(head);
  }
  return out;
}

// What run() and layout() decide alike before the passes: micro-batches, chunks, the checks.
void Planner::start_layout() {
  const int P = p_.pipeline;
  const std::int64_t per_step = static_cast<std::int64_t>(p_.data) * p_.micro_batch;
  if (t_.global_batch % per_step != 0) throw std::invalid_argument("global batch must be a multiple of data x micro_batch_size");
  m_ = t_.global_batch / per_step;
  v_ = p_.schedule == Schedule::Interleaved ? p_.virtual_stages : 1;
  chunks_ = P * v_;
  plan_.micro_batches = m_;
  plan_.graph.num_ranks = p_.data * P * p_.tensor * p_.context;
  if (p_.schedule == Schedule::ZeroBubbleH1 && p_.zero_stage == 3 && p_.data > 1)
    throw std::invalid_argument("zero-bubble-h1 is modelled without ZeRO-3");
  if (p_.schedule == Schedule::PipeDream && p_.zero_stage > 0 && p_.data > 1)
    throw std::invalid_argument("pipedream is modelled without ZeRO");
  if (!p_.stage_blocks.empty() && (v_ != 1 || static_cast<int>(p_.stage_blocks.size()) != P))
    throw std::invalid_argument("stage_blocks needs one count per stage and no virtual stages");
  chunk_layers_ = split_chunks(g_, chunks_, p_.stage_blocks);
  chunk_kept_.clear();
  for (const auto& layers : chunk_layers_) chunk_kept_.push_back(kept_activations(layers, p_.recompute));
}

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
