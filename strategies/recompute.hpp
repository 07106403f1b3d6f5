#pragma once
// Which blocks recomputation reaches and how each is checkpointed, resolved once over a layout's
// model chunks: every block as the scenario's `recompute`, or, under full recomputation, only
// some of them (ParallelismSpec::recompute_layers, recompute_every) or several at a time
// (recompute_group). The passes (strategies/works.hpp), the memory (plan_memory.cpp) and the
// units read a block's recomputation here, never the scenario's `recompute` alone.
#include <unordered_map>
#include <vector>

#include "models/model_graph.hpp"
#include "strategies/spec.hpp"

namespace dtsim::strategies {

using Layers = std::vector<const models::Layer*>;

// Recomputation that re-runs a block's whole forward, its collectives included, before its backward.
inline bool reruns_whole(Recompute r) { return r == Recompute::Full || r == Recompute::Stage; }

class Checkpoints {
 public:
  Checkpoints() = default;
  // Over model chunks in order, chunk c on stage c % pipeline.
  Checkpoints(const ParallelismSpec& p, const std::vector<Layers>& chunks, int pipeline);

  // What layer l recomputes: the scenario's recomputation for a block it reaches, none for a
  // block it leaves and for the embedding and head.
  Recompute of(const models::Layer& l) const;
  // Activation bytes one micro-batch leaves behind after its forward through `layers`: what each
  // op saves, less what recomputation drops (a checkpointed run of blocks keeps only its first
  // block's input).
  double kept(const Layers& layers) const;
  // The most bytes backward rebuilds at once in `layers`: the largest checkpointed run's saved
  // bytes (one block under full recomputation, a group, a whole chunk under stage).
  double rebuilt(const Layers& layers) const;

 private:
  // opens: how many blocks are rebuilt from this block's input; 0 inside a run, and for blocks
  // not re-run whole.
  struct Block {
    Recompute how = Recompute::None;
    int opens = 0;
  };
  const Block& block(const models::Layer& l) const;
  std::unordered_map<const models::Layer*, Block> blocks_;
};

}  // namespace dtsim::strategies
