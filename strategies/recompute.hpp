#pragma once
// Which blocks recomputation reaches and how each is checkpointed, resolved once over a layout's
// model chunks: every block as the scenario's `recompute`, or, under full recomputation, only
// some of them (ParallelismSpec::recompute_layers, recompute_every) or several at a time
// (recompute_group). The passes (strategies/works.hpp), the memory (plan_memory.cpp) and the
// units read a block's recomputation here, never the scenario's `recompute` alone; and what
// backward re-runs of each op (reruns).
#include <utility>
#include <vector>

#include "models/model_graph.hpp"
#include "strategies/spec.hpp"

namespace dtsim::strategies {

using Layers = std::vector<const models::Layer*>;

// Recomputation that re-runs a block's whole forward, its collectives included, before its backward.
inline bool reruns_whole(Recompute r) { return r == Recompute::Full || r == Recompute::Stage; }
// Recomputation that checkpoints the block: backward runs a forward of it again (all or part).
inline bool checkpoints_block(Recompute r) { return reruns_whole(r) || r == Recompute::Op; }

// What backward re-runs of one op: all of its forward, or some of its calls (a fused QKV's wk
// alone) after the element-wise kernels of its forward (FP8 casts); nothing when both are empty.
struct Rerun {
  bool whole = false;
  std::vector<std::size_t> calls;
  bool any() const { return whole || !calls.empty(); }
};
// Per op of layer l recomputed as r, in op order. Op follows torchtitan's op-level policy
// (activation_checkpoint.py, _apply_op_sac with its mm_count rule; the save list of
// models/llama3/parallelize.py): a matmul (a call of a linear without bias: aten.mm) returns a
// tensor kept for backward unless it is the block's 2nd, 4th, ... matmul; fused attention's
// output is kept; everything else is re-run, up to the last op whose backward needs a saved
// input (torch.utils.checkpoint stops there).
std::vector<Rerun> reruns(const models::Layer& l, Recompute r);
// The kernels of one op's re-run, in the order they run.
std::vector<models::Kernel> rerun_kernels(const models::Op& op, const Rerun& again);
// The same kernels handed to `f` one by one, in the same order, without copying them (a sweep
// sums their FLOPs for every layer of every candidate).
template <class F>
void for_each_rerun_kernel(const models::Op& op, const Rerun& again, F&& f) {
  if (again.whole) {
    for (const auto& k : op.forward) f(k);
    return;
  }
  if (again.calls.empty()) return;
  for (const auto& k : op.forward)
    if (k.kind == models::KernelKind::Memory) f(k);
  for (std::size_t c : again.calls) f(op.calls[c].kernel);
}
// Whether recomputation r re-runs all of op (of a block) where it is not op-level: reruns()'s
// rule for Full, Stage and Selective.
inline bool reruns_op_whole(const models::Op& op, Recompute r) {
  return reruns_whole(r) || (r == Recompute::Selective && op.selective);
}

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
  // block's input; op-level checkpointing also the tensors its policy keeps).
  double kept(const Layers& layers) const;
  // The most bytes backward rebuilds at once in `layers`: the largest checkpointed run's saved
  // bytes (one block under full and op-level recomputation, a group, a whole chunk under stage);
  // under Megatron-Core's selective modules, the most one block's modules dropped. (Korthikanti's
  // selective recomputation, modules not given, is counted as his paper counts it: without it.)
  double rebuilt(const Layers& layers) const;

 private:
  // opens: how many blocks are rebuilt from this block's input; 0 inside a run, and for blocks
  // not checkpointed.
  struct Block {
    Recompute how = Recompute::None;
    int opens = 0;
  };
  const Block& block(const models::Layer& l) const;
  double op_level_kept(const models::Layer& l) const;
  // Each block the chunks hold, by address: a layout's chunks hold them in model order, so this
  // is sorted as built (a hash map cost a node per block of every candidate a sweep plans).
  std::vector<std::pair<const models::Layer*, Block>> blocks_;
  // Under sequence parallelism op-level checkpointing keeps the reduce-scatters' outputs too.
  int tensor_ = 1;
  bool sequence_parallel_ = false;
  std::uint8_t modules_ = 0;  // ParallelismSpec::recompute_modules
};

}  // namespace dtsim::strategies
