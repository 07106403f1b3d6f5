#pragma once
// The parameter trace ZeRO-3 and FSDP follow (strategies/units/framework_zero3.cpp): which gather
// each op of a pass waits for, the segments a pass splits into, and the collectives a micro-batch
// makes; the unit emits tasks from it and its task count reads the same.
#include <cstddef>
#include <vector>

#include "strategies/framework.hpp"
#include "strategies/recompute.hpp"
#include "strategies/spec.hpp"

namespace dtsim::strategies::zero3 {

// One op's part of a pass: its forward (or recompute forward) or its backward kernels, and the
// gather it waits for.
struct Item {
  int op = 0;
  bool rerun = false;
  int wait = -1;
};

// Layer li's items in one direction, in the order they run, each with the gather it waits for
// (-1: none), following the parameter trace from `cursor` on. `early` receives the gathers a
// recompute without gathers of its own needs before it starts (its backward's).
std::vector<Item> layer_items(const models::Layer& l, int li, bool forward, const FrameworkSpec& f, Recompute r,
                              const std::vector<ParamUse>& uses, const std::vector<int>& wait, std::size_t& cursor,
                              std::vector<int>& early);

// FSDP2 under expert parallelism, as torchtitan applies it (pytorch/torchtitan at f64bbad4,
// torchtitan/models/llama4/infra/parallelize.py apply_fsdp, lines 295-475; at b5bcd76c the same
// split in torchtitan/distributed/fsdp.py apply_fsdp_to_decoder, lines 268-360): a block's routed
// experts are sharded over the "dp_shard_mod_ep" ("efsdp") mesh, the GPUs holding the same experts
// (dtsim's expert-data-parallel group), everything else over the whole data-parallel mesh. So a
// block's gather is two all-gathers, the dense part's over the data-parallel group, then the
// experts' over the expert-data-parallel one (none when that is one GPU), issued together
// (set_modules_to_forward_prefetch([next_block, next_block.moe.experts]), the same for backward),
// and its post-backward two reduce-scatters: the experts' unit first (its backward ends inside
// the block's), then the block's.
// The elements of a block's gather or reduce-scatter that go over the expert-data-parallel group.
double expert_part(const ParallelismSpec& p, const models::Layer& l);

// A layer the experts unit runs (its all-to-alls and pieces) rather than one of our segments.
bool handed(const ParallelismSpec& p, const models::Layer& l);

// Segments start at each item that waits; each is one compute task.
std::vector<std::size_t> segment_starts(const std::vector<Item>& items);

// A micro-batch's parameter trace on one chunk: its uses, the gathers and which each use waits for.
struct Trace {
  std::vector<ParamUse> uses;
  std::vector<int> wait;
  std::vector<Gather> gathers;
  std::size_t forward_uses = 0;
  std::vector<int> burst_first;  // per_parameter: each burst's first gather, and the count at the end
  Trace() = default;
  Trace(const Layers& layers, const FrameworkSpec& f, const Checkpoints& ck);
  int first(int burst) const { return burst_first[static_cast<std::size_t>(burst)]; }
  int bursts() const { return static_cast<int>(burst_first.size()) - 1; }
};

// Compute tasks one micro-batch's forward and backward of `layers` take (the MoE layers handed to
// the experts unit count there).
double segments_per_micro_batch(const Layers& layers, const ParallelismSpec& p, const Checkpoints& ck);

// Per micro-batch on one chunk: the gathers and reduce-scatters, those over the data-parallel (or
// shard) groups and the experts' over the expert-data-parallel groups.
struct Collectives {
  double gathers = 0, reduces = 0, expert_gathers = 0, expert_reduces = 0;
};
Collectives micro_batch_collectives(const Layers& layers, const ParallelismSpec& p, const Checkpoints& ck);

}  // namespace dtsim::strategies::zero3
