#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "models/model_graph.hpp"
#include "sim/taskgraph/task_graph.hpp"
#include "strategies/recompute.hpp"
#include "strategies/spec.hpp"

namespace dtsim::strategies {

// Shares one Work among identical passes so the cost model prices each distinct one once.
// Works are identical when their repeat, fixed seconds, kernels (name, batch, m, n, k, bytes)
// and inline collectives match; the name is the first one's. Found by a hash of those plain
// fields and a field-by-field comparison, so no key text is built.
class WorkTable {
 public:
  explicit WorkTable(taskgraph::TaskGraph& g) : g_(g) {}
  int get(taskgraph::Work w);
  // How many Work values were handed to get(): what the planner built, before sharing.
  std::size_t built() const { return built_; }

 private:
  taskgraph::TaskGraph& g_;
  std::unordered_map<std::uint64_t, std::vector<int>> ids_;  // hash -> works with that hash
  std::size_t built_ = 0;
};

// The tensor-parallel collectives a layer's pass blocks on, from its split rule
// (models::TensorSplit), on the tensor group `group`; a backward's recomputation adds its own
// (recompute_comms).
std::vector<taskgraph::InlineCollective> tensor_parallel_comms(const models::Layer& layer, bool forward, const ParallelismSpec& p,
                                                               int group);
// The collectives a backward's recomputation of the layer re-runs first, recomputed as `r`: the
// whole forward's under full or stage recomputation.
std::vector<taskgraph::InlineCollective> recompute_comms(const models::Layer& layer, Recompute r, const ParallelismSpec& p,
                                                         int group);

// A stage's context-parallel groups: all its context ranks, and the pair closing the ring.
struct ContextGroups {
  int all = -1, ring = -1;
};

// The K/V exchange a layer's pass blocks on under context parallelism (see ParallelismSpec::context):
// ring steps hidden behind the attention kernel at index `attention_kernel` of the work, or the
// all-gather (and reduce-scatter of the gradients) that Llama 3 runs exposed.
std::vector<taskgraph::InlineCollective> context_parallel_comms(const models::Layer& layer, bool forward,
                                                                const ParallelismSpec& p, const ContextGroups& groups,
                                                                int attention_kernel);

// Forward and backward work of a run of layers; backward first re-runs what recomputation drops,
// each block as `ck` says (null: every block as p.recompute, `layers` being one chunk).
taskgraph::Work forward_work(const std::vector<const models::Layer*>& layers, const models::ModelGraph& g,
                             const ParallelismSpec& p, int tp_group, const ContextGroups& cp = {});
taskgraph::Work backward_work(const std::vector<const models::Layer*>& layers, const models::ModelGraph& g,
                              const ParallelismSpec& p, int tp_group, const ContextGroups& cp = {},
                              const Checkpoints* ck = nullptr);
// Zero-bubble's halves of a backward (Qi et al. 2024): the input-gradient pass B (everything
// but the weight gradients: recomputation, dgrad GEMMs, attention and element-wise backward,
// the tensor-parallel collectives on the input gradient) or the weight-gradient pass W (the
// wgrad GEMMs, the embedding's scatter-add, and gradient accumulation).
taskgraph::Work backward_part_work(const std::vector<const models::Layer*>& layers, const models::ModelGraph& g,
                                   const ParallelismSpec& p, int tp_group, bool weight, const Checkpoints* ck = nullptr);
// A kernel that computes a weight gradient: "*.wgrad" GEMMs and convolutions, the embedding
// table's scatter-add.
bool weight_gradient_kernel(const models::Kernel& k);
// Bytes the W passes of `layers` read, held from B until W: each weight-gradient GEMM's input X
// and output gradient dY (dW = X^T dY), in `element_bytes` per value.
double weight_pass_bytes(const std::vector<const models::Layer*>& layers, int element_bytes);
// An MoE layer's pass cut at its all-to-alls (models::ExpertSplit), in the order it runs: forward
// is the ops before the dispatch, the experts, the ops after the combine; backward is the ops
// after the combine (their gradients, re-run ones first), the experts, the ops before the
// dispatch with the weight-gradient accumulation. Tensor-parallel collectives go with the last,
// except those that tensor-parallel overlap pairs with the attention's GEMMs: forward, with the first.
// Recomputed as `r`. Under full recomputation backward leaves out the re-run forward: the
// planner emits it, with its all-to-alls, before the backward. Under Megatron-Core's shared-expert
// overlap (ParallelismSpec::moe_shared_expert_overlap) the shared experts leave the last piece:
// [3] runs beside the pass's first all-to-all (forward their input projection and activation,
// backward their output projection's), [4] beside the second; else those two are empty. Under
// Megatron-Core's moe recompute module (reruns_moe_module) backward leaves out the MoE layer's
// re-run and its collectives too, and `again` is that re-run, a forward of the MoE layer's ops
// alone (router to shared experts) with the tensor-parallel pair they run again. Under context
// parallelism the attention's piece carries its K/V exchange (context_parallel_comms, on `cp`).
bool shared_experts_apart(const ParallelismSpec& p, const models::Layer& l);
bool reruns_moe_module(const models::Layer& l, Recompute r, const ParallelismSpec& p);
std::array<taskgraph::Work, 5> moe_pass_works(const models::Layer& l, bool forward, const models::ModelGraph& g,
                                             const ParallelismSpec& p, int tp_group, Recompute r, bool again = false,
                                             const ContextGroups& cp = {});
// Matmul FLOPs backward re-runs for recomputation.
double recompute_flops(const models::Layer& layer, Recompute r);

// Parameters of the layers' FP8 GEMMs (Transformer Engine keeps an FP8 copy of each such weight
// and of its transpose beside the bf16 one).
double fp8_weight_params(const std::vector<const models::Layer*>& layers);
// Casting those weights to FP8 (and transposing) once per step after the optimizer has updated
// them: read 2 bytes, write 1 + 1, per parameter; FP8 parameters only rebuild their transpose.
models::Kernel fp8_weight_cast_kernel(double params, Fp8WeightCopies copies);

}  // namespace dtsim::strategies
