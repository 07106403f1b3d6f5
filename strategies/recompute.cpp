#include "strategies/recompute.hpp"

#include <algorithm>
#include <stdexcept>

namespace dtsim::strategies {

namespace {
struct Place {
  int in_chunk, chunk_blocks, in_stage;  // in_stage counts from 1, as torchtitan's counter does
};

// Megatron-LM's TransformerBlock._checkpointed_forward works per chunk (its layers on this
// pipeline rank): `block` checkpoints layers l < recompute_num_layers one by one, `uniform` runs
// of recompute_num_layers from the chunk's first. torchtitan's _apply_layer_sac wraps a block
// when its process-wide count (1, 2, ... over the rank's model parts in order) is a multiple of n.
int opens(const ParallelismSpec& p, const Place& at) {
  const int g = std::max(1, p.recompute_group);
  return at.in_chunk % g == 0 ? std::min(g, at.chunk_blocks - at.in_chunk) : 0;
}

bool reached(const ParallelismSpec& p, const Place& at) {
  if (p.recompute_layers > 0 && at.in_chunk >= p.recompute_layers) return false;
  if (p.recompute_every > 0 && at.in_stage % p.recompute_every != 0) return false;
  return true;
}
}  // namespace

Checkpoints::Checkpoints(const ParallelismSpec& p, const std::vector<Layers>& chunks, int pipeline) {
  std::vector<int> counted(static_cast<std::size_t>(std::max(1, pipeline)), 0);
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    int& in_stage = counted[c % counted.size()];
    const int n = static_cast<int>(std::count_if(chunks[c].begin(), chunks[c].end(),
                                                 [](const models::Layer* l) { return l->kind == models::LayerKind::Block; }));
    int i = 0;
    for (const auto* l : chunks[c]) {
      if (l->kind != models::LayerKind::Block) continue;
      const Place at{i++, n, ++in_stage};
      Block& b = blocks_[l];
      if (p.recompute == Recompute::Stage) b = {Recompute::Stage, at.in_chunk == 0 ? n : 0};
      else if (p.recompute != Recompute::Full) b = {p.recompute, 0};
      else if (reached(p, at)) b = {Recompute::Full, opens(p, at)};
    }
  }
}

const Checkpoints::Block& Checkpoints::block(const models::Layer& l) const {
  const auto it = blocks_.find(&l);
  if (it == blocks_.end()) throw std::logic_error("recomputation asked for a block outside the layout's chunks: " + l.name);
  return it->second;
}

Recompute Checkpoints::of(const models::Layer& l) const {
  return l.kind == models::LayerKind::Block ? block(l).how : Recompute::None;
}

double Checkpoints::kept(const Layers& layers) const {
  double b = 0;
  for (const auto* l : layers) {
    const Recompute how = of(*l);
    if (reruns_whole(how)) {
      if (block(*l).opens > 0) b += l->input_bytes;
      continue;
    }
    for (const auto& op : l->ops) b += how == Recompute::Selective ? op.saved_bytes_selective : op.saved_bytes;
  }
  return b;
}

double Checkpoints::rebuilt(const Layers& layers) const {
  double most = 0, run = 0;
  for (const auto* l : layers) {
    if (!reruns_whole(of(*l))) {
      run = 0;
      continue;
    }
    if (block(*l).opens > 0) run = 0;
    run += l->saved_bytes();
    most = std::max(most, run);
  }
  return most;
}

}  // namespace dtsim::strategies
