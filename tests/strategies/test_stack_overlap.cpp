// The software stack's overlapped communication (issue 30, slice 2): what collectives take from
// compute (communication interference) and tensor-parallel overlap, against their closed forms;
// the default stack unchanged; the keys' refusals. Whole steps on the analytical backend but one
// (both backends agree), so a process replays SimGrid at most once.
#include <gtest/gtest.h>

#include <algorithm>

#include "reports/reports.hpp"
#include "scenario_helpers.hpp"
#include "shared_cores_case.hpp"
#include "sim/config/scenario.hpp"
#include "sim/cost/comm_interference.hpp"
#include "sim/network/collectives.hpp"
#include "sim/results/inline_comm.hpp"
#include "sim/results/result.hpp"
#include "strategies/works.hpp"

using namespace dtsim;
using taskgraph::CollectiveOp;
using taskgraph::InlineCollective;
using taskgraph::OverlapCut;

namespace {

cost::DeviceProfile h100(const std::string& stack) {
  auto d = config::load_device_profile("h100-sxm-80gb");
  d.stack = *cost::find_stack(stack);
  return d;
}

// Llama 3 8B cut to `layers` blocks, tensor-parallel over the 2 GPUs of one node, sequence
// parallel, no data parallelism: every collective is a tensor-parallel one inside a pass.
std::string tp2(const std::string& stack, int layers = 2) {
  return R"({"schema_version": 1, "name": "tp2", "model": {"preset": "llama-3-8b", "num_layers": )" + std::to_string(layers) +
         R"(}, "hardware": {"device": "h100-sxm-80gb"},
    "cluster": {"nodes": 1, "gpus_per_node": 2, "intra_node": {"bandwidth_GBps": 450, "latency_us": 2},
                "inter_node": {"nics_per_node": 1, "nic_bandwidth_GBps": 50, "latency_us": 5}},
    "parallelism": {"data": 1, "tensor": 2, "micro_batch_size": 1, "sequence_parallel": true},
    "training": {"global_batch_size": 1, "precision": "bf16", "attention": "flash"},
    "simulation": {"backend": "analytical"}, "stack": {"preset": ")" + stack + R"("}})";
}

results::Result run(const std::string& json) {
  test::TempDir dir;
  return results::simulate(config::load_scenario(dir.file("s.json", json)));
}

std::string error_of(const std::string& json) {
  test::TempDir dir;
  try {
    config::load_scenario(dir.file("s.json", json));
  } catch (const InputError& e) {
    return e.pointer() + ": " + e.reason();
  }
  return "";
}

const models::Layer& first_block(const results::Result& r, models::ModelGraph& keep) {
  const auto& s = r.scenario_spec;
  models::BuildOptions o{s.parallelism.micro_batch, 2, s.training.attention, s.parallelism.tensor, s.parallelism.sequence_parallel};
  keep = s.model.build(o);
  return *std::find_if(keep.layers.begin(), keep.layers.end(), [](const models::Layer& l) { return l.kind == models::LayerKind::Block; });
}

}  // namespace

TEST(CommInterference, PresetsHoldTheDevicesNcclSms) {
  // 16 of the H100's 132 SMs (hardware_profiles/h100-sxm-80gb.json: comm-004, comm-012, comm-001).
  EXPECT_DOUBLE_EQ(cost::comm_sm_share(h100("megatron-te")), 16.0 / 132.0);
  EXPECT_DOUBLE_EQ(cost::comm_sm_share(h100("torchtitan-compile")), 16.0 / 132.0);
  EXPECT_EQ(cost::comm_sm_share(h100("default")), 0.0);
  auto b200 = config::load_device_profile("b200");  // names no sm_count: not modelled
  b200.stack = *cost::find_stack("megatron-te");
  EXPECT_EQ(cost::comm_sm_share(b200), 0.0);
}

TEST(CommInterference, OneGemmBesideOneCollectiveStretchesByTheSmShare) {
  // GPU 0 computes 1 s while its 12.5 GB transfer (T = 0.5 s) runs: at 1 - 16/132 of its rate for
  // T, then full: it ends at 1 + T x 16/132. GPU 2, with no collective, keeps 1 s.
  test::SharedCoresCase c;
  const double s = cost::comm_sm_share(h100("megatron-te"));
  const auto t = replay::replay_analytical(c.input(s));
  const auto i = [](int task) { return static_cast<std::size_t>(task); };
  const double comm = t.end[i(c.send)] - t.start[i(c.send)];
  EXPECT_NEAR(t.end[i(c.overlapped)], 1.0 + comm * 16.0 / 132.0, 1e-12);
  EXPECT_NEAR(t.end[i(c.apart)], 1.0, 1e-12);
  // The breakdown books the stretch as communication interference, the 1 s as compute.
  const std::vector<double> none(c.graph.works.size(), 0.0);
  const auto b = replay::step_breakdown(c.graph, t, c.seconds, none,
                                        {.rank = 0, .horizon = t.end[0], .comm_core_share = s, .sms = true});
  EXPECT_NEAR(b.compute, 1.0, 1e-9);
  EXPECT_NEAR(b.comm_interference, comm * 16.0 / 132.0, 1e-9);
  EXPECT_EQ(b.exposed_communication, 0.0);
  EXPECT_NEAR(b.total(), t.end[0], 1e-9);
}

TEST(CommInterference, DataParallelStepShowsItAndTheDefaultStackDoesNot) {
  const auto plain = test::simulate_over_base(R"({"extends": "base.json", "simulation": {"backend": "analytical"}})");
  const auto te = test::simulate_over_base(
      R"({"extends": "base.json", "simulation": {"backend": "analytical"}, "stack": {"preset": "default", "comm_sms": 16}})");
  EXPECT_FALSE(results::to_json(plain, false)["breakdown_s"].contains("comm_interference"));
  EXPECT_GT(te.breakdown.comm_interference, 0.0);  // A100, 8-way DDP: buckets reduce beside backward
  EXPECT_GT(te.step_time_s, plain.step_time_s);
  EXPECT_EQ(results::to_json(te, false)["breakdown_s"]["comm_interference"], te.breakdown.comm_interference);
  test::expect_parts_sum_to_step(te);
  EXPECT_GE(te.breakdown.comm_interference, 0.0);
  // What compute lost: at most the step's kernel share of the compute, which result.json states.
  const double share = results::to_json(te, false)["stack"]["comm_compute_share"];
  EXPECT_GT(share, 0.0);
  EXPECT_LE(te.breakdown.comm_interference, share / (1 - share) * te.breakdown.compute);
}

TEST(CommInterference, BothBackendsAgree) {
  const std::string s = R"({"extends": "base.json", "stack": {"preset": "megatron-te"}, "simulation": {"backend": ")";
  const auto a = test::simulate_over_base(s + R"(analytical"}})");
  const auto g = test::simulate_over_base(s + R"(simgrid"}})");
  EXPECT_GT(a.breakdown.comm_interference, 0.0);
  EXPECT_NEAR(g.step_time_s, a.step_time_s, 1e-6 * a.step_time_s);
  EXPECT_NEAR(g.breakdown.comm_interference, a.breakdown.comm_interference, 1e-6 * a.step_time_s);
}

TEST(CommInterference, EachKernelLosesByWhatItIs) {
  // 16 of the H100's 132 SMs held. A GEMM's 256 x 128 output tiles run in waves over the SMs left:
  // 2048 x 2048 has 8 x 16 = 128 tiles, one wave on 132 SMs, two on 116; 8192 x 8192 has 2048,
  // 16 waves, then 18. Streams lose nothing; flash attention and convolutions their SMs' share.
  const auto d = h100("megatron-te");
  auto gemm = [](std::int64_t m, std::int64_t n) {
    models::Kernel k;
    k.kind = models::KernelKind::Gemm;
    k.m = m, k.n = n, k.k = 4096;
    return k;
  };
  EXPECT_DOUBLE_EQ(cost::kernel_slowdown(d, gemm(2048, 2048), 16), 2.0);
  EXPECT_DOUBLE_EQ(cost::kernel_slowdown(d, gemm(8192, 8192), 16), 18.0 / 16.0);
  models::Kernel stream;
  stream.kind = models::KernelKind::Memory;
  EXPECT_DOUBLE_EQ(cost::kernel_slowdown(d, stream, 16), 1.0);
  models::Kernel attention = gemm(8192, 8192);
  attention.role = models::KernelRole::FlashForward;
  EXPECT_DOUBLE_EQ(cost::kernel_slowdown(d, attention, 16), 132.0 / 116.0);
  EXPECT_DOUBLE_EQ(cost::kernel_slowdown(d, gemm(2048, 2048), 0), 1.0);
}

TEST(CommInterference, TheStepLosesItsKernelsTimeWeightedShare) {
  // Two works: a one-wave GEMM (twice as long beside the collective) run by two tasks, a stream by
  // one. Share lost = 1 - alone / beside = 1 - (2g + s) / (4g + s).
  const auto d = h100("megatron-te");
  taskgraph::TaskGraph g;
  g.num_ranks = 1;
  taskgraph::Work w1, w2;
  models::Kernel k1;
  k1.kind = models::KernelKind::Gemm;
  k1.m = k1.n = k1.k = 2048;
  k1.flops = 2.0 * 2048 * 2048 * 2048;
  k1.bytes = 3.0 * 2048 * 2048 * 2;
  models::Kernel k2;
  k2.kind = models::KernelKind::Memory;
  k2.bytes = 1e9;
  w1.kernels = {k1};
  w2.kernels = {k2};
  const int a = g.add_work(w1), b = g.add_work(w2);
  g.add_compute(0, a, taskgraph::Category::Compute, "gemm 1", {});
  g.add_compute(0, a, taskgraph::Category::Compute, "gemm 2", {});
  g.add_compute(0, b, taskgraph::Category::Compute, "stream", {});
  const double tg = cost::quote_kernel(d, k1, "bf16").seconds, ts = cost::quote_kernel(d, k2, "bf16").seconds;
  EXPECT_NEAR(cost::comm_kernel_share(d, g, "bf16"), 1 - (2 * tg + ts) / (4 * tg + ts), 1e-12);
  // The default stack holds no SMs: nothing lost.
  EXPECT_EQ(cost::comm_kernel_share(h100("default"), g, "bf16"), 0.0);
}

TEST(CommInterference, RefusesBadSmCounts) {
  auto e = test::input_error_over_base(R"({"extends": "base.json", "stack": {"comm_sms": -1}})");
  EXPECT_NE(e.find("/stack/comm_sms"), std::string::npos) << e;
  e = test::input_error_over_base(R"({"extends": "base.json", "stack": {"comm_sms": 108}})");  // all of an A100's
  EXPECT_NE(e.find("/stack/comm_sms"), std::string::npos) << e;
  EXPECT_NE(e.find("none for compute"), std::string::npos) << e;
  e = test::input_error_over_base(R"({"extends": "base.json", "hardware": {"device": "b200"}, "stack": {"comm_sms": 16}})");
  EXPECT_NE(e.find("sm_count"), std::string::npos) << e;
  e = test::input_error_over_base(R"({"extends": "base.json", "stack": {"comm_sm": 16}})");
  EXPECT_NE(e.find("comm_sms"), std::string::npos) << e;  // did you mean
}

TEST(InlineCost, EachCutAgainstItsClosedForm) {
  // 1 ms collective alone, a 0.8 ms GEMM, 16 of 128 SMs held (K' = 0.8 / (1 - 1/8)).
  auto alone = [](double bytes) { return bytes / 1e9; };  // 1 GB/s: 1e6 bytes take 1 ms
  const double k = 0.8e-3, kk = k / (1.0 - 0.125);
  InlineCollective c{CollectiveOp::AllGather, 0, 1e6, 1};
  c.hidden_by = 0;
  c.cut = OverlapCut::Ring;
  c.chunks = 4;  // 3 steps of 1/3 ms beside K'/4 each
  auto r = results::inline_cost(c, 1e-3, alone, k, 0.0);
  EXPECT_NEAR(r.exposed, 3 * std::max(0.0, 1e-3 / 3 - k / 4), 1e-15);
  EXPECT_EQ(r.interference, 0.0);
  c.cut = OverlapCut::Pipeline;  // each quarter after its GEMM slice, the last one exposed
  r = results::inline_cost(c, 1e-3, alone, k, 0.125);
  EXPECT_NEAR(r.exposed, 3 * (0.25e-3 - kk / 4) + 0.25e-3, 1e-15);
  EXPECT_NEAR(r.interference, kk - k, 1e-15);
  c.cut = OverlapCut::Bulk;
  r = results::inline_cost(c, 1e-3, alone, k, 0.125);
  EXPECT_NEAR(r.exposed, 1e-3 - kk, 1e-15);
  EXPECT_NEAR(r.interference, kk - k, 1e-15);
  c.bytes = 0.5e6;  // hidden whole: only the margin costs
  r = results::inline_cost(c, 0.5e-3, alone, k, 0.125);
  EXPECT_EQ(r.exposed, 0.0);
  // No cut: the old price, count messages less what ring attention hides of each.
  InlineCollective ring{CollectiveOp::SendRecv, 0, 1e6, 3, 0, 0.25};
  EXPECT_NEAR(results::inline_cost(ring, 3e-3, alone, k, 0.0).exposed, 3 * (1e-3 - 0.2e-3), 1e-15);
}

TEST(TpOverlap, TransformerEnginePairsEveryBlockCollectiveWithItsGemm) {
  const auto r = run(tp2("megatron-te-tp-overlap"));
  models::ModelGraph g;
  const auto& block = first_block(r, g);
  const auto& p = r.scenario_spec.parallelism;
  const auto fwd = strategies::forward_work({&block}, g, p, 0);
  const auto bwd = strategies::backward_work({&block}, g, p, 0);
  auto count = [](const taskgraph::Work& w, OverlapCut cut, CollectiveOp op) {
    int n = 0;
    for (const auto& c : w.comms) n += c.cut == cut && c.op == op ? static_cast<int>(c.count) : 0;
    return n;
  };
  // Forward: all-gathers into QKV and fc1 by ring exchange, reduce-scatters out of the output
  // projection and fc2 pipelined in 4. Backward: proj/fc2 dgrad ring exchange; QKV/fc1 bulk.
  EXPECT_EQ(count(fwd, OverlapCut::Ring, CollectiveOp::AllGather), 2);
  EXPECT_EQ(count(fwd, OverlapCut::Pipeline, CollectiveOp::ReduceScatter), 2);
  EXPECT_EQ(count(bwd, OverlapCut::Ring, CollectiveOp::AllGather), 2);
  EXPECT_EQ(count(bwd, OverlapCut::Bulk, CollectiveOp::AllGather), 2);
  EXPECT_EQ(count(bwd, OverlapCut::Bulk, CollectiveOp::ReduceScatter), 2);
  for (const auto* w : {&fwd, &bwd})
    for (const auto& c : w->comms) EXPECT_NE(c.cut, OverlapCut::None);  // nothing left on the stream
}

// An MoE block's attention is a dense block's: under Transformer Engine's overlap its QKV and
// output projection take their collectives beside their GEMMs, in the piece before the dispatch
// (forward) and after it (backward); the experts' own (expert tensor parallelism = tensor here)
// stay on the stream after the combine. Mixtral cut to 2 blocks, TP 2 x EP 2 on 4 GPUs.
TEST(TpOverlap, AnMoeBlocksAttentionPairsItsCollectivesWithItsGemms) {
  auto moe = [](const std::string& stack) {
    return R"({"schema_version": 1, "name": "moe-tp2", "model": {"preset": "mixtral-8x7b", "num_layers": 2, "seq_len": 2048},
      "hardware": {"device": "h100-sxm-80gb"}, "cluster": {"preset": "dgx-h100", "nodes": 1, "gpus_per_node": 4, "inter_node": {"nics_per_node": 4}},
      "parallelism": {"data": 2, "tensor": 2, "expert": 2, "micro_batch_size": 1, "sequence_parallel": true},
      "training": {"global_batch_size": 2, "attention": "flash"}, "simulation": {"backend": "analytical"},
      "stack": {"preset": ")" + stack + R"("}})";
  };
  const auto plain = run(moe("megatron-te")), over = run(moe("megatron-te-tp-overlap"));
  models::ModelGraph g;
  const auto& block = first_block(over, g);
  ASSERT_TRUE(block.experts.moe());
  const auto& p = over.scenario_spec.parallelism;
  const auto fwd = strategies::moe_pass_works(block, true, g, p, 0, strategies::Recompute::None);
  const auto bwd = strategies::moe_pass_works(block, false, g, p, 0, strategies::Recompute::None);
  auto count = [](const taskgraph::Work& w, bool paired) {
    int n = 0;
    for (const auto& c : w.comms) n += (c.cut != OverlapCut::None) == paired ? static_cast<int>(c.count) : 0;
    return n;
  };
  // Forward: the gather into QKV and the reduce-scatter out of the projection, paired; the
  // experts' gather and reduce-scatter after the combine. Backward: the attention's dgrad gather,
  // bulk gather and bulk reduce-scatter paired; the experts' three plain.
  EXPECT_EQ(count(fwd[0], true), 2);
  EXPECT_EQ(count(fwd[0], false), 0);
  EXPECT_EQ(count(fwd[2], true), 0);
  EXPECT_EQ(count(fwd[2], false), 2);
  EXPECT_EQ(count(bwd[2], true), 3);
  EXPECT_EQ(count(bwd[2], false), 3);
  for (const auto& c : fwd[0].comms) EXPECT_EQ(fwd[0].kernels.at(static_cast<std::size_t>(c.hidden_by)).kind, models::KernelKind::Gemm);
  EXPECT_LT(over.breakdown.exposed_communication, plain.breakdown.exposed_communication);
  EXPECT_LT(over.step_time_s, plain.step_time_s);
  test::expect_parts_sum_to_step(over);
}

TEST(TpOverlap, TwoGpuExposedTpTimeFallsByTheClosedForm) {
  // By hand, per block forward: AG of B bytes over 2 ranks (C_ag) beside QKV and fc1 split in 2
  // (ring: 1 step, exposed max(0, C_ag - K/2)); RS after the projection and fc2 in 4 splits on 116
  // of 132 SMs (exposed 3 max(0, r - K'/4) + r, r the RS of B/4; interference K' - K).
  const auto plain = run(tp2("megatron-te"));
  const auto over = run(tp2("megatron-te-tp-overlap"));
  models::ModelGraph g;
  const auto& block = first_block(over, g);
  const auto& d = over.scenario_spec.device;
  const network::Platform pf(over.scenario_spec.cluster);
  const double bytes = block.tensor_split.bytes;
  auto alone = [&](CollectiveOp op, double b) { return network::inline_time(pf, {op, 0, b, 1.0}, {0, 1}); };
  auto gemm = [&](const std::string& name) {
    for (const auto& op : block.ops)
      if (op.name == name)
        for (const auto& k : op.forward)
          if (k.kind == models::KernelKind::Gemm) return cost::quote_kernel(d, k, "bf16").seconds;
    return 0.0;
  };
  const double s = 16.0 / 132.0;
  double exposed = 0, lost = 0;
  for (const char* col : {"qkv", "mlp.gate_up"}) exposed += std::max(0.0, alone(CollectiveOp::AllGather, bytes) - gemm(col) / 2);
  for (const char* row : {"attention.out", "mlp.fc2"}) {
    const double kk = gemm(row) / (1 - s), r4 = alone(CollectiveOp::ReduceScatter, bytes / 4);
    exposed += 3 * std::max(0.0, r4 - kk / 4) + r4;
    lost += kk - gemm(row);
  }
  // Without overlap each block's forward blocks on 2 all-gathers and 2 reduce-scatters of B. The
  // embedding's and head's collectives are the same in both: over the step's forward passes
  // (2 blocks, one micro-batch), exposed time falls by 2 (blocking - exposed).
  const double blocking = 2 * alone(CollectiveOp::AllGather, bytes) + 2 * alone(CollectiveOp::ReduceScatter, bytes);
  double fwd_plain = 0, fwd_over = 0, fwd_lost = 0;
  for (const auto& t : over.plan.graph.tasks)
    if (!t.is_collective && t.category == taskgraph::Category::Compute &&
        over.plan.graph.works[static_cast<std::size_t>(t.work)].name.rfind("fwd", 0) == 0) {
      const auto i = static_cast<std::size_t>(t.work);
      fwd_plain += plain.work_comm_seconds[i];
      fwd_over += over.work_comm_seconds[i];
      fwd_lost += over.work_interference_seconds[i];
    }
  EXPECT_NEAR(fwd_plain - fwd_over, 2 * (blocking - exposed), 1e-12);
  EXPECT_NEAR(fwd_lost, 2 * lost, 1e-12);
  // The step: no collective outside the passes (one replica), so the step falls by what the
  // passes' prices fall, and its exposed communication by what their exposed parts do.
  EXPECT_LT(over.breakdown.exposed_communication, 0.5 * plain.breakdown.exposed_communication);
  double fall = 0, exposed_fall = 0;
  for (const auto& t : over.plan.graph.tasks)
    if (!t.is_collective) {
      const auto i = static_cast<std::size_t>(t.work);
      fall += plain.work_seconds[i] - over.work_seconds[i];
      exposed_fall += plain.work_comm_seconds[i] - over.work_comm_seconds[i];
    }
  EXPECT_NEAR(plain.step_time_s - over.step_time_s, fall, 1e-9);
  EXPECT_NEAR(plain.breakdown.exposed_communication - over.breakdown.exposed_communication, exposed_fall, 1e-9);
  test::expect_parts_sum_to_step(over);
}

TEST(TpOverlap, AsyncTpLeavesTheWeightGradientGatherExposed) {
  const auto r = run(tp2("torchtitan-async-tp"));
  models::ModelGraph g;
  const auto& block = first_block(r, g);
  const auto bwd = strategies::backward_work({&block}, g, r.scenario_spec.parallelism, 0);
  int ring = 0, plain = 0;
  for (const auto& c : bwd.comms) (c.cut == OverlapCut::Ring ? ring : plain) += static_cast<int>(c.count);
  EXPECT_EQ(ring, 4);   // dY gathered into proj/fc2 dgrad, dX scattered out of QKV/fc1 dgrad
  EXPECT_EQ(plain, 2);  // X re-gathered for the QKV/fc1 weight gradients
  for (const auto& c : bwd.comms) EXPECT_EQ(c.margin_sms, 0);  // copy engines: no SMs held
  test::expect_parts_sum_to_step(r);
}

TEST(TpOverlap, ZeroBubbleWeightPassTakesItsCollectivesOffTheKernel) {
  // Zero-bubble's B and W passes split each backward: the bulk reduce-scatter beside a weight
  // GEMM loses it (blocks the B pass), the others follow their GEMM to its new index.
  const auto r = run(R"({"schema_version": 1, "name": "zb", "model": {"preset": "llama-3-8b", "num_layers": 4},
    "hardware": {"device": "h100-sxm-80gb"},
    "cluster": {"nodes": 1, "gpus_per_node": 4, "intra_node": {"bandwidth_GBps": 450, "latency_us": 2},
                "inter_node": {"nics_per_node": 1, "nic_bandwidth_GBps": 50, "latency_us": 5}},
    "parallelism": {"data": 1, "tensor": 2, "pipeline": 2, "pipeline_schedule": "zero-bubble-h1", "micro_batch_size": 1,
                    "sequence_parallel": true},
    "training": {"global_batch_size": 4, "precision": "bf16", "attention": "flash"},
    "simulation": {"backend": "analytical"}, "stack": {"preset": "megatron-te-tp-overlap"}})");
  int overlapped = 0;
  for (const auto& w : r.plan.graph.works)
    for (const auto& c : w.comms)
      if (c.cut != OverlapCut::None) {
        ASSERT_GE(c.hidden_by, 0) << w.name;
        ASSERT_LT(static_cast<std::size_t>(c.hidden_by), w.kernels.size()) << w.name;
        EXPECT_EQ(w.kernels[static_cast<std::size_t>(c.hidden_by)].kind, models::KernelKind::Gemm) << w.name;
        ++overlapped;
      }
  EXPECT_GT(overlapped, 0);
  test::expect_parts_sum_to_step(r);
}

TEST(TpOverlap, RefusesAnUnknownSchemeAndOverlapWithoutSequenceParallelism) {
  auto json = tp2("megatron-te");
  json.replace(json.find(R"("preset": "megatron-te")"), 23, R"("preset": "megatron-te", "tp_overlap": "userbuffers")");
  auto e = error_of(json);
  EXPECT_NE(e.find("/stack/tp_overlap"), std::string::npos) << e;
  EXPECT_NE(e.find("te-userbuffers"), std::string::npos) << e;
  json = tp2("megatron-te");
  json.replace(json.find(R"("preset": "megatron-te")"), 23, R"("preset": "megatron-te", "tp_overlap": "te-userbuffers")");
  json.replace(json.find(R"("sequence_parallel": true)"), 25, R"("sequence_parallel": false)");
  e = error_of(json);
  EXPECT_NE(e.find("/stack/tp_overlap"), std::string::npos) << e;
  EXPECT_NE(e.find("sequence_parallel"), std::string::npos) << e;
  // The preset without sequence parallelism: the all-reduces block the stream, as before.
  json = tp2("megatron-te-tp-overlap");
  json.replace(json.find(R"("sequence_parallel": true)"), 25, R"("sequence_parallel": false)");
  EXPECT_EQ(error_of(json), "");
}

TEST(CommInterference, PeerStagesSlowedByItAreNotStragglerWait) {
  // Two stages, four replicas: gradient buckets reduce beside the stages' backwards, so peer stages
  // run late only by the interference. Without stragglers none of it is straggler wait.
  const auto r = test::simulate_over_base(
      R"({"extends": "base.json", "simulation": {"backend": "analytical"}, "stack": {"preset": "megatron-te"},
          "parallelism": {"data": 4, "pipeline": 2, "micro_batch_size": 2}})");
  EXPECT_GT(r.breakdown.comm_interference, 0.0);
  EXPECT_EQ(r.breakdown.straggler_wait, 0.0);
  test::expect_parts_sum_to_step(r);
}

// JAX/XLA on TPU v4 (jax-xla): one compiled program (no host launch per kernel, element-wise
// chains fused), collectives on the ICI engines (no cores held), and the tensor-parallel
// collectives as XLA's collective matmul: the blocks' exposed communication falls, the GEMMs'
// time does not change, and the breakdown still adds up.
TEST(TpOverlap, JaxXlaOverlapsTensorParallelCollectivesOnATpu) {
  auto tpu = [](const std::string& stack) {
    return R"({"schema_version": 1, "name": "tpu-tp4", "model": {"preset": "llama-3-8b", "num_layers": 2},
      "hardware": {"device": "tpu-v4"}, "cluster": {"preset": "tpu-v4-pod", "nodes": 1, "inter_node": {"dimensions": [2, 2, 1]}},
      "parallelism": {"data": 1, "tensor": 4, "micro_batch_size": 1, "sequence_parallel": true},
      "training": {"global_batch_size": 1, "attention": "flash"}, "simulation": {"backend": "analytical"},
      "stack": {"preset": ")" + stack + R"("}})";
  };
  const auto plain = run(tpu("default")), xla = run(tpu("jax-xla"));
  const auto& st = xla.scenario_spec.device.stack;
  EXPECT_EQ(st.dispatch_s, 0.0);
  EXPECT_EQ(st.comm_sms, 0);
  EXPECT_EQ(st.elementwise, cost::Elementwise::Compiled);
  EXPECT_EQ(xla.breakdown.comm_interference, 0.0);
  EXPECT_LT(xla.breakdown.exposed_communication, 0.8 * plain.breakdown.exposed_communication);
  EXPECT_LT(xla.step_time_s, plain.step_time_s);
  test::expect_parts_sum_to_step(xla);
}

// Tensor-parallel groups are consecutive chips: on a 2 x 8 x 1 torus (nodes of 4) groups of 4 fill
// no whole dimensions in any order, so their collectives take routes between chips and the result
// says so; on 4 x 4 x 1 they fill the first dimension and run its rings. The same bytes, the same
// GEMMs: the aligned layout is faster and not warned of. A torus listed in another order is laid
// out as JAX would lay its mesh axes, with the same result as the order that serves.
TEST(TpOverlap, TensorGroupsOffTheTorusDimensionsAreSlowerAndWarnedOf) {
  auto tpu = [](const std::string& dims, int tensor) {
    return R"({"schema_version": 1, "name": "tpu-tp", "model": {"preset": "llama-3-8b", "num_layers": 2},
      "hardware": {"device": "tpu-v4"}, "cluster": {"preset": "tpu-v4-pod", "nodes": 4, "inter_node": {"dimensions": )" +
           dims + R"(}}, "parallelism": {"data": )" + std::to_string(16 / tensor) + R"(, "tensor": )" + std::to_string(tensor) +
           R"(, "micro_batch_size": 1}, "training": {"global_batch_size": )" + std::to_string(16 / tensor) +
           R"(, "attention": "flash"}, "simulation": {"backend": "analytical"}, "stack": {"preset": "jax-xla"}})";
  };
  auto warned = [](const results::Result& r) {
    return std::any_of(r.warnings.begin(), r.warnings.end(), [](const std::string& w) { return w.find("torus") != std::string::npos; });
  };
  const auto off = run(tpu("[2, 8, 1]", 4)), along = run(tpu("[4, 4, 1]", 4));
  EXPECT_TRUE(warned(off));
  EXPECT_FALSE(warned(along));
  EXPECT_LT(along.breakdown.exposed_communication, off.breakdown.exposed_communication);
  EXPECT_LT(along.step_time_s, off.step_time_s);
  test::expect_parts_sum_to_step(along);
  const auto listed = run(tpu("[4, 2, 2]", 2)), served = run(tpu("[2, 4, 2]", 2));
  EXPECT_FALSE(warned(listed));
  // The summary says the torus as written and the order it ran in.
  EXPECT_NE(reports::summary(listed).find("(4 nodes x 4; torus 4 x 2 x 2, laid out 2 x 4 x 2 for the tensor groups)"), std::string::npos)
      << reports::summary(listed);
  EXPECT_NE(reports::summary(served).find("(4 nodes x 4; torus 2 x 4 x 2)"), std::string::npos);
  EXPECT_DOUBLE_EQ(listed.step_time_s, served.step_time_s);
  EXPECT_DOUBLE_EQ(listed.breakdown.exposed_communication, served.breakdown.exposed_communication);
}
