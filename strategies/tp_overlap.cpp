#include "strategies/tp_overlap.hpp"

#include "strategies/works.hpp"

namespace dtsim::strategies {

using models::TpLinear;
using taskgraph::CollectiveOp;
using taskgraph::InlineCollective;
using taskgraph::OverlapCut;

namespace {

// One collective a linear's pass overlaps: which, beside which of its GEMMs, cut how.
struct Pairing {
  CollectiveOp op;
  int TpLinearAt::*gemm;
  OverlapCut cut;
  int chunks;  // 0: the tensor group's size
  int margin_sms;
};

// Transformer Engine, initialize_ub's defaults (transformer_engine/pytorch/module/base.py
// @d0067d0, get_default_config): qkv/fc1_fprop and proj/fc2_dgrad "ring_exchange" (num_splits =
// tp_size, set_sm_margin False, use_ce True: copy-engine sends, no SMs held); proj/fc2_fprop
// "pipeline" (num_splits 4, num_sm 16, set_sm_margin True: the GEMM runs on SMs - 16,
// CommOverlapCore::_math_sms); qkv/fc1_dgrad "bulk" all-gather of the input for the weight
// gradient beside the dgrad GEMM, qkv/fc1_wgrad "bulk" reduce-scatter of the input gradient beside
// the wgrad GEMM (num_sm 16, set_sm_margin True). comm_interference.json comm-022: num_sm 16.
constexpr int kTeCommSms = 16;
constexpr int kTePipelineSplits = 4;

std::vector<Pairing> te_pairings(TpLinear role, bool forward) {
  if (forward)
    return role == TpLinear::Column
               ? std::vector<Pairing>{{CollectiveOp::AllGather, &TpLinearAt::gemm, OverlapCut::Ring, 0, 0}}
               : std::vector<Pairing>{{CollectiveOp::ReduceScatter, &TpLinearAt::gemm, OverlapCut::Pipeline, kTePipelineSplits, kTeCommSms}};
  if (role == TpLinear::Row) return {{CollectiveOp::AllGather, &TpLinearAt::dgrad, OverlapCut::Ring, 0, 0}};
  return {{CollectiveOp::AllGather, &TpLinearAt::dgrad, OverlapCut::Bulk, 1, kTeCommSms},
          {CollectiveOp::ReduceScatter, &TpLinearAt::wgrad, OverlapCut::Bulk, 1, kTeCommSms}};
}

// PyTorch async TP (torch/_inductor/fx_passes/micro_pipeline_tp.py, torchtitan's
// --compile.enable_async_tensor_parallel): all_gather -> mm becomes fused_all_gather_matmul and
// mm -> reduce_scatter fused_matmul_reduce_scatter, each in group-size chunks whose transfers are
// tensor copies through symmetric memory (torch/distributed/_symmetric_memory: copy engines, no
// SMs held). Only a GEMM whose token dimension is gathered or scattered fuses: forward both,
// backward the row-parallel dgrad (gathered dY) and the column-parallel dgrad (scattered dX); the
// input re-gathered for a weight gradient stays exposed.
std::vector<Pairing> async_pairings(TpLinear role, bool forward) {
  if (forward)
    return {{role == TpLinear::Column ? CollectiveOp::AllGather : CollectiveOp::ReduceScatter, &TpLinearAt::gemm,
             OverlapCut::Ring, 0, 0}};
  return {{role == TpLinear::Row ? CollectiveOp::AllGather : CollectiveOp::ReduceScatter, &TpLinearAt::dgrad, OverlapCut::Ring,
           0, 0}};
}

// Takes one message of `op` out of the plain collectives; false when none is left.
bool take(std::vector<InlineCollective>& plain, CollectiveOp op, InlineCollective& taken) {
  for (auto& c : plain)
    if (c.op == op && c.cut == OverlapCut::None && c.hidden_by < 0 && c.count >= 1) {
      taken = c;
      taken.count = 1;
      c.count -= 1;
      return true;
    }
  return false;
}

}  // namespace

std::optional<TpLinearAt> find_tp_linear(const models::Op& op, bool forward, const std::vector<models::Kernel>& kernels,
                                         std::size_t at) {
  if (op.tp_linear == TpLinear::None) return std::nullopt;
  TpLinearAt out{op.tp_linear, forward};
  for (std::size_t i = at; i < kernels.size(); ++i) {
    if (kernels[i].kind != models::KernelKind::Gemm) continue;
    const int index = static_cast<int>(i);
    if (forward) out.gemm = out.gemm < 0 ? index : out.gemm;
    else if (weight_gradient_kernel(kernels[i])) out.wgrad = index;
    else out.dgrad = index;
  }
  return out;
}

std::vector<InlineCollective> overlap_tp_comms(std::vector<InlineCollective> plain, const std::vector<TpLinearAt>& linears,
                                               const ParallelismSpec& p) {
  if (p.tp_overlap == taskgraph::TpOverlap::None || p.tensor <= 1 || !p.sequence_parallel) return plain;
  std::vector<InlineCollective> out;
  for (const auto& at : linears) {
    const auto pairings = p.tp_overlap == taskgraph::TpOverlap::TransformerEngine ? te_pairings(at.role, at.forward)
                                                                                  : async_pairings(at.role, at.forward);
    for (const auto& pr : pairings) {
      InlineCollective c;
      if (at.*pr.gemm < 0 || !take(plain, pr.op, c)) continue;
      c.hidden_by = at.*pr.gemm;
      c.cut = pr.cut;
      c.chunks = pr.chunks > 0 ? pr.chunks : p.tensor;
      c.margin_sms = pr.margin_sms;
      out.push_back(c);
    }
  }
  for (auto& c : plain)
    if (c.count > 0) out.push_back(c);
  return out;
}

void remap_tp_overlap(std::vector<InlineCollective>& comms, const std::vector<int>& kept) {
  for (auto& c : comms) {
    if (c.cut == OverlapCut::None) continue;
    const int now = kept[static_cast<std::size_t>(c.hidden_by)];
    c.hidden_by = now;
    if (now < 0) c = InlineCollective{c.op, c.group, c.bytes, c.count};
  }
}

}  // namespace dtsim::strategies
