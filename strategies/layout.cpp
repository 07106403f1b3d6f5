#include "strategies/layout.hpp"

#include <stdexcept>
#include <string>

namespace dtsim::strategies {

Layers Layout::stage_layers(int s) const {
  Layers out;
  for (int j = s; j < chunks; j += pipeline)
    for (const auto* l : chunk_layers[static_cast<std::size_t>(j)]) out.push_back(l);
  return out;
}

Layout layout_of(const ParallelismSpec& p, const TrainingSpec& t) {
  Layout k(p);
  k.data = p.data, k.tensor = p.tensor, k.pipeline = p.pipeline, k.context = p.context, k.expert = p.expert;
  k.virtual_stages = p.schedule->chunked ? p.virtual_stages : 1;
  k.chunks = p.pipeline * k.virtual_stages;
  k.micro_batches = micro_batches(t.global_batch, p.data, p.micro_batch);
  // Gradients are summed over data x context ranks (context parallelism splits sequences, not weights).
  k.grad_ranks = p.data * p.context;
  k.shard_ranks = hybrid_shard(p) ? p.shard_size * p.context : k.grad_ranks;
  k.expert_data = p.expert_data();
  k.sync = p.updates == Updates::Sync;
  // Every asynchronous worker runs on its own, so each gets its own tasks.
  k.replicas = p.all_replicas || !k.sync ? p.data : 1;
  k.iterations = p.updates == Updates::Easgd ? p.easgd_period : 1;
  return k;
}

Layout layout_of(const models::ModelGraph& g, const ParallelismSpec& p, const TrainingSpec& t) {
  const std::int64_t per_step = static_cast<std::int64_t>(p.data) * p.micro_batch;
  if (t.global_batch % per_step != 0) throw std::invalid_argument("global batch must be a multiple of data x micro_batch_size");
  Layout k = layout_of(p, t);
  if (p.schedule->splits_backward && p.zero_stage == 3 && p.data > 1)
    throw std::invalid_argument(std::string(p.schedule->name) + " is modelled without ZeRO-3");
  if (p.schedule->updates_per_backward && p.zero_stage > 0 && p.data > 1)
    throw std::invalid_argument(std::string(p.schedule->name) + " is modelled without ZeRO");
  if (!p.stage_blocks.empty() && static_cast<int>(p.stage_blocks.size()) != k.chunks)
    throw std::invalid_argument("stage_blocks needs one count per model chunk (pipeline x virtual stages)");
  k.chunk_layers = split_chunks(g, k.chunks, p.stage_blocks);
  k.checkpoints = Checkpoints(p, k.chunk_layers, k.pipeline);
  return k;
}

// Blocks split evenly (the first chunks take one more when they do not divide) unless `blocks`
// gives each chunk's count, the embedding on the first chunk and the head on the last, after
// the multi-token prediction modules (Megatron-Core's default place for them, the last stage).
std::vector<Layers> split_chunks(const models::ModelGraph& g, int chunks, const std::vector<int>& blocks_per_chunk) {
  Layers blocks, mtp;
  const models::Layer *embedding = nullptr, *head = nullptr;
  for (const auto& l : g.layers) {
    if (l.kind == models::LayerKind::Embedding) embedding = &l;
    else if (l.kind == models::LayerKind::Head) head = &l;
    else if (l.mtp) mtp.push_back(&l);
    else blocks.push_back(&l);
  }
  const std::size_t n = static_cast<std::size_t>(chunks);
  if (blocks_per_chunk.empty() && blocks.size() < n) throw std::invalid_argument("more model chunks than transformer blocks");
  std::vector<Layers> out(n);
  std::size_t next = 0;
  for (std::size_t c = 0; c < n; ++c) {
    std::size_t count = blocks.size() / n + (c < blocks.size() % n ? 1 : 0);
    if (!blocks_per_chunk.empty()) count = static_cast<std::size_t>(blocks_per_chunk.at(c));
    if (next + count > blocks.size()) throw std::invalid_argument("stage layers add up to more than the model's blocks");
    if (c == 0 && embedding) out[c].push_back(embedding);
    for (std::size_t i = 0; i < count; ++i) out[c].push_back(blocks[next++]);
    if (c + 1 == n) out[c].insert(out[c].end(), mtp.begin(), mtp.end());
    if (c + 1 == n && head) out[c].push_back(head);
  }
  return out;
}

}  // namespace dtsim::strategies
