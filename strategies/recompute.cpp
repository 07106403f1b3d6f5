#include "strategies/recompute.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
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

// What eager PyTorch calls for an op: nothing the save list names, aten.mm (a linear without a
// bias), aten.addmm (with one: not in the save list) or fused attention (SDPA).
enum class Calls { Other, Matmul, AddMm, Attention };
Calls calls_of(const models::Op& op) {
  if (op.calls.empty()) return Calls::Other;
  if (op.calls.front().kernel.kind != models::KernelKind::Gemm) return Calls::Attention;
  const bool bias = std::any_of(op.backward.begin(), op.backward.end(),
                                [](const models::Kernel& k) { return k.role == models::KernelRole::BiasWeightGrad; });
  return bias ? Calls::AddMm : Calls::Matmul;
}

// torchtitan's op-level policy over one block (see reruns): each op's re-run, and the bytes of
// the calls' outputs it keeps added to `kept`.
std::vector<Rerun> op_level(const models::Layer& l, double* kept) {
  std::vector<Rerun> out(l.ops.size());
  std::size_t last = 0;  // the last op whose backward needs what it saved
  for (std::size_t i = 0; i < l.ops.size(); ++i)
    if (l.ops[i].saved_bytes > 0) last = i;
  int matmuls = 0;
  double saved = 0;
  for (std::size_t i = 0; i < l.ops.size(); ++i) {
    const auto& op = l.ops[i];
    switch (calls_of(op)) {
      case Calls::Attention:
        for (const auto& c : op.calls) saved += c.output_bytes;
        break;
      case Calls::Matmul:
        for (std::size_t c = 0; c < op.calls.size(); ++c) {
          if (++matmuls % 2 == 1) saved += op.calls[c].output_bytes;
          else if (i <= last) out[i].calls.push_back(c);
        }
        break;
      default: out[i].whole = i <= last;
    }
  }
  if (kept) *kept += saved;
  return out;
}
}  // namespace

std::vector<Rerun> reruns(const models::Layer& l, Recompute r) {
  std::vector<Rerun> out(l.ops.size());
  if (l.kind != models::LayerKind::Block || r == Recompute::None) return out;
  if (r == Recompute::Op) return op_level(l, nullptr);
  for (std::size_t i = 0; i < l.ops.size(); ++i) out[i].whole = reruns_op_whole(l.ops[i], r);
  return out;
}

std::vector<models::Kernel> rerun_kernels(const models::Op& op, const Rerun& again) {
  if (again.whole) return op.forward;
  std::vector<models::Kernel> out;
  for_each_rerun_kernel(op, again, [&](const models::Kernel& k) { out.push_back(k); });
  return out;
}

Checkpoints::Checkpoints(const ParallelismSpec& p, const std::vector<Layers>& chunks, int pipeline)
    : tensor_(p.tensor), sequence_parallel_(p.sequence_parallel), modules_(p.recompute_modules) {
  std::vector<int> counted(static_cast<std::size_t>(std::max(1, pipeline)), 0);
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    int& in_stage = counted[c % counted.size()];
    const int n = static_cast<int>(std::count_if(chunks[c].begin(), chunks[c].end(),
                                                 [](const models::Layer* l) { return l->kind == models::LayerKind::Block; }));
    int i = 0;
    for (const auto* l : chunks[c]) {
      if (l->kind != models::LayerKind::Block) continue;
      const Place at{i++, n, ++in_stage};
      Block& b = blocks_.emplace_back(l, Block{}).second;
      if (p.recompute == Recompute::Stage) b = {Recompute::Stage, at.in_chunk == 0 ? n : 0};
      else if (p.recompute == Recompute::Op) b = {Recompute::Op, 1};
      else if (p.recompute != Recompute::Full) b = {p.recompute, 0};
      else if (reached(p, at)) b = {Recompute::Full, opens(p, at)};
    }
  }
  // Chunks hold a model's layers in order, each once; any other order is sorted here.
  auto by_address = [](const auto& a, const auto& b) { return std::less<const models::Layer*>{}(a.first, b.first); };
  if (!std::is_sorted(blocks_.begin(), blocks_.end(), by_address)) std::stable_sort(blocks_.begin(), blocks_.end(), by_address);
}

const Checkpoints::Block& Checkpoints::block(const models::Layer& l) const {
  // Asked for every layer of every pass: the blocks usually sit one after another in the model's
  // layer vector, so l's place from the first is tried before searching.
  if (!blocks_.empty()) {
    const auto at = reinterpret_cast<std::uintptr_t>(&l), first = reinterpret_cast<std::uintptr_t>(blocks_.front().first);
    const std::size_t k = at >= first ? (at - first) / sizeof(models::Layer) : blocks_.size();
    if (k < blocks_.size() && blocks_[k].first == &l) return blocks_[k].second;
  }
  const auto it = std::lower_bound(blocks_.begin(), blocks_.end(), &l,
                                   [](const auto& e, const models::Layer* x) { return std::less<const models::Layer*>{}(e.first, x); });
  if (it == blocks_.end() || it->first != &l)
    throw std::logic_error("recomputation asked for a block outside the layout's chunks: " + l.name);
  return it->second;
}

Recompute Checkpoints::of(const models::Layer& l) const {
  return l.kind == models::LayerKind::Block ? block(l).how : Recompute::None;
}

// The block's input, the outputs the policy keeps and, under sequence parallelism, the
// reduce-scatters' (torchtitan's save list names reduce_scatter_tensor): this rank's share of
// the tokens of each.
double Checkpoints::op_level_kept(const models::Layer& l) const {
  double b = l.input_bytes;
  op_level(l, &b);
  if (tensor_ > 1 && sequence_parallel_) b += l.tensor_split.forward_sums * l.tensor_split.bytes / tensor_;
  return b;
}

double Checkpoints::kept(const Layers& layers) const {
  double b = 0;
  for (const auto* l : layers) {
    const Recompute how = of(*l);
    if (reruns_whole(how)) {
      if (block(*l).opens > 0) b += l->input_bytes;
      continue;
    }
    if (how == Recompute::Op) {
      b += op_level_kept(*l);
      continue;
    }
    for (const auto& op : l->ops) b += how == Recompute::Selective ? op.saved_bytes_selective : op.saved_bytes;
  }
  return b;
}

double Checkpoints::rebuilt(const Layers& layers) const {
  double most = 0, run = 0;
  for (const auto* l : layers) {
    const Recompute how = of(*l);
    if (how == Recompute::Selective && (modules_ & models::recompute_module::kGiven)) {
      // Megatron-Core's modules rebuild what they dropped when backward reaches the block.
      double dropped = 0;
      for (const auto& op : l->ops) dropped += op.saved_bytes - op.saved_bytes_selective;
      most = std::max(most, dropped);
    }
    if (!checkpoints_block(how)) {
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
