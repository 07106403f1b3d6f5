#pragma once
// Tensor-parallel communication overlap, a software stack's mechanism (issue 30): the
// sequence-parallel all-gathers and reduce-scatters of a block are cut into chunks pipelined with
// the GEMMs of the linear layers they feed or drain, as Transformer Engine's userbuffers
// (Megatron-Core --tp-comm-overlap) and PyTorch's async TP (torchtitan) do. The planner records
// where each tensor-parallel linear's GEMMs landed in a work, then pairs the pass's collectives
// with them; what nothing pairs with stays on the compute stream. Priced by results/inline_comm.
#include <optional>
#include <vector>

#include "models/model_graph.hpp"
#include "sim/taskgraph/task_graph.hpp"
#include "strategies/spec.hpp"

namespace dtsim::strategies {

// Where one pass of a tensor-parallel linear put its GEMMs in a work's kernels (-1: not there).
struct TpLinearAt {
  models::TpLinear role = models::TpLinear::None;
  bool forward = true;  // its forward GEMM (also a re-run forward under recomputation), else dgrad and wgrad
  int gemm = -1, dgrad = -1, wgrad = -1;
};

// The GEMMs of `op`'s pass that was appended to `kernels` at index `at`; nothing when the op is
// not a tensor-parallel linear.
std::optional<TpLinearAt> find_tp_linear(const models::Op& op, bool forward, const std::vector<models::Kernel>& kernels,
                                         std::size_t at);

// A block pass's tensor-parallel collectives (tensor_parallel_comms) with those the stack overlaps
// paired to the GEMMs in `linears`, one collective each; the rest as they were. Unchanged unless
// p.tp_overlap is set, with sequence parallelism over more than one tensor rank.
std::vector<taskgraph::InlineCollective> overlap_tp_comms(std::vector<taskgraph::InlineCollective> plain,
                                                          const std::vector<TpLinearAt>& linears, const ParallelismSpec& p);

// After a work's kernels were filtered (zero-bubble's B and W passes), `kept[i]` the new index of
// old kernel i or -1: overlapped collectives follow their kernel, or block the stream without it.
void remap_tp_overlap(std::vector<taskgraph::InlineCollective>& comms, const std::vector<int>& kept);

}  // namespace dtsim::strategies
