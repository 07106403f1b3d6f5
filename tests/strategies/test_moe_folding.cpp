// Issue 30: MoE parallel folding (expert tensor parallelism, the expert grid over tensor x data
// ranks) and the expert all-to-all overlap (Megatron-Core's combined 1F1B, DualPipe).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "sim/config/build_options.hpp"
#include "sim/core/errors.hpp"
#include "sim/cost/comm_interference.hpp"
#include "sim/cost/roofline.hpp"
#include "sim/network/collectives.hpp"
#include "sim/network/platform.hpp"
#include "sim/results/result.hpp"
#include "strategies/schedule.hpp"
#include "strategies/units/units.hpp"
#include "helpers.hpp"
#include "moe_scenario.hpp"
#include "scenario_helpers.hpp"

using namespace dtsim;

namespace {

// The ranks of every group an all-to-all or an expert bucket names.
std::vector<std::vector<int>> groups_of(const results::Result& r, taskgraph::CollectiveOp op, const std::string& label) {
  std::vector<std::vector<int>> out;
  for (const auto& t : r.plan.graph.tasks)
    if (t.is_collective && t.collective().op == op && t.label().find(label) != std::string::npos)
      for (int g : t.collective().groups) out.push_back(r.plan.graph.groups[static_cast<std::size_t>(g)]);
  return out;
}

double expert_params(const models::ModelGraph& g) {
  double x = 0;
  for (const auto& l : g.layers) x += l.expert_params();
  return x;
}

}  // namespace

// TP 2 x DP 8 on two 8-GPU nodes with EP 8: Megatron-Core's default (expert tensor = tensor) takes
// the group's 8 GPUs from one tensor rank, every other GPU of two nodes; folded with expert tensor
// parallelism 1, the group is 8 consecutive GPUs, one node (parallel_state.py, order tp-ep-dp).
TEST(MoeFolding, AllToAllGroupStaysInOneNodeForTp2Ep8) {
  test::TempDir dir;
  const std::string base = R"("tensor": 2, "data": 8, "expert": 8, "sequence_parallel": true)";
  const auto folded = results::simulate(test::moe_scenario(dir, 2, base + R"(, "expert_tensor": 1)"));
  const auto spread = results::simulate(test::moe_scenario(dir, 2, base));
  const auto inside = groups_of(folded, taskgraph::CollectiveOp::AllToAll, "");
  ASSERT_FALSE(inside.empty());
  for (const auto& ranks : inside) {
    ASSERT_EQ(ranks.size(), 8u);
    EXPECT_EQ(ranks.front() / 8, ranks.back() / 8);
    EXPECT_EQ(ranks.back() - ranks.front(), 7);
  }
  for (const auto& ranks : groups_of(spread, taskgraph::CollectiveOp::AllToAll, "")) EXPECT_NE(ranks.front() / 8, ranks.back() / 8);
  // Same bytes per GPU (each sends its own tokens / tensor), through NVLink instead of the NICs.
  EXPECT_LT(folded.all_to_all_s * 3, spread.all_to_all_s);
  EXPECT_LT(folded.step_time_s, spread.step_time_s);
  test::expect_parts_sum_to_step(folded);
}

// Expert > data: EP 16 folded over TP 2 x DP 8. Each GPU holds num_experts / 16 experts whole (ETP
// 1); nothing else holds them (expert-data 1), so no expert gradient is summed.
TEST(MoeFolding, ExpertParallelismLargerThanDataFoldsOverTensorRanks) {
  test::TempDir dir;
  const auto s = test::moe_scenario(dir, 2, R"("tensor": 2, "data": 8, "expert": 16, "expert_tensor": 1, "sequence_parallel": true)");
  EXPECT_EQ(s.parallelism.expert_data(), 1);
  const auto r = results::simulate(s);
  for (const auto& ranks : groups_of(r, taskgraph::CollectiveOp::AllToAll, "")) EXPECT_EQ(ranks.size(), 16u);
  EXPECT_TRUE(groups_of(r, taskgraph::CollectiveOp::AllReduce, "expert bucket").empty());
  test::expect_parts_sum_to_step(r);
}

// Memory and the expert gradients' all-reduce against their closed forms. With N_x expert
// parameters, each GPU holds N_x / (EP x ETP) of them, and sums their gradients (bf16: 2 bytes
// each) over the EDP = TP x DP / (EP x ETP) GPUs holding the same ones; ZeRO-1 shards their
// optimizer state (12 bytes) over those EDP GPUs, the dense one's over DP.
TEST(MoeFolding, ExpertStateAndGradientSyncByExpertTensorAndExpertData) {
  test::TempDir dir;
  const double whole_x = expert_params(test::moe_scenario(dir, 2, R"("data": 16)").model.build(models::BuildOptions{1, 2, models::Attention::Flash}));
  struct Case {
    int ep, etp, edp;
  };
  for (const Case c : {Case{4, 1, 4}, Case{4, 2, 2}, Case{2, 1, 8}}) {
    SCOPED_TRACE(std::to_string(c.ep) + " x " + std::to_string(c.etp));
    const auto s = test::moe_scenario(dir, 2, R"("tensor": 2, "data": 8, "zero_stage": 1, "expert": )" + std::to_string(c.ep) +
                                                  R"(, "expert_tensor": )" + std::to_string(c.etp));
    EXPECT_EQ(s.parallelism.expert_data(), c.edp);
    const auto g = s.model.build(config::build_options(s));
    const double x = expert_params(g), dense = g.params() - x;
    EXPECT_NEAR(x, whole_x / (c.ep * c.etp), 1.0);
    const auto m = results::memory_only(s);
    EXPECT_NEAR(m.memory.params, 2.0 * (dense + x), 1.0);
    EXPECT_NEAR(m.memory.optimizer, 12.0 * (dense / 8 + x / c.edp), 1.0);
    const auto r = results::simulate(s);
    double bytes = 0;
    for (const auto& t : r.plan.graph.tasks)
      if (t.is_collective && t.label().find("expert bucket") != std::string::npos) {
        bytes += t.collective().bytes;
        ASSERT_EQ(t.collective().groups.size(), static_cast<std::size_t>(c.ep * c.etp));
        for (int grp : t.collective().groups) EXPECT_EQ(r.plan.graph.groups[static_cast<std::size_t>(grp)].size(), static_cast<std::size_t>(c.edp));
      }
    EXPECT_NEAR(bytes, 2.0 * x, 1.0);
  }
}

// Folding moves the experts' work between GPUs, not its amount: each GPU runs tokens x top-k /
// tensor tokens' expert MLPs, whatever EP and ETP.
TEST(MoeFolding, ExpertFlopsPerGpuDoNotDependOnTheFold) {
  test::TempDir dir;
  auto expert_flops = [&](const std::string& grid) {
    const auto s = test::moe_scenario(dir, 2, R"("tensor": 2, "data": 8, )" + grid);
    double f = 0;
    for (const auto& l : s.model.build(config::build_options(s)).layers)
      for (const auto& op : l.ops)
        if (op.expert)
          for (const auto& k : op.forward) f += k.flops;
    return f;
  };
  const double base = expert_flops(R"("expert": 4)");
  EXPECT_GT(base, 0);
  EXPECT_NEAR(expert_flops(R"("expert": 4, "expert_tensor": 1)") / base, 1.0, 1e-12);
  EXPECT_NEAR(expert_flops(R"("expert": 8, "expert_tensor": 1)") / base, 1.0, 1e-12);
  EXPECT_NEAR(expert_flops(R"("expert": 16, "expert_tensor": 1)") / base, 1.0, 1e-12);
}

TEST(MoeFolding, BadGridsAreInputErrors) {
  test::TempDir dir;
  auto fails = [&](const std::string& parallelism, const std::string& key, const std::string& says) {
    try {
      (void)test::moe_scenario(dir, 2, parallelism);
      ADD_FAILURE() << parallelism << " was accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(e.pointer(), key) << e.what();
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  fails(R"("tensor": 2, "data": 8, "expert": 16)", "/parallelism/expert", "expert_tensor");  // not folded: EP must divide DP
  fails(R"("tensor": 2, "data": 8, "expert": 16, "expert_tensor": 2)", "/parallelism/expert_tensor", "does not divide tensor");
  fails(R"("tensor": 2, "data": 8, "expert": 4, "expert_tensor": 3)", "/parallelism/expert_tensor", "expert_ffn_hidden_size");
  fails(R"("data": 16, "moe_a2a_overlap": "megatron-1f1b")", "/parallelism/moe_a2a_overlap", "expert > 1");
  fails(R"("data": 16, "expert": 8, "moe_a2a_overlap": "megatron-1f1b", "recompute": "full")", "/parallelism/moe_a2a_overlap",
        "full recomputation");
  fails(R"("data": 8, "pipeline": 2, "expert": 8, "moe_a2a_overlap": "megatron-1f1b")", "/parallelism/moe_a2a_overlap", "virtual");
  fails(R"("data": 16, "expert": 8, "moe_a2a_overlap": "dual-pipe")", "/parallelism/moe_a2a_overlap", "dualpipe");
}

// 1F1B on stage 0 of 4 with 8 micro-batches: 3 warm-up forwards, then each forward beside the
// backward after it (5 pairs), then 3 cool-down backwards. The last stage runs F0 B0 F1 B1 ...:
// a forward cannot run beside its own backward, so F(i+1) pairs with B(i): 7 pairs.
TEST(MoeOverlap, WarmUpAndCoolDownPassesRunAlone) {
  auto count = [](int stage) {
    const auto ops = strategies::stage_schedule(strategies::Schedule::OneFOneB, 4, stage, 8, 1);
    const auto paired = strategies::paired_passes(ops);
    int f = 0, b = 0;
    for (std::size_t i = 0; i < ops.size(); ++i)
      if (paired[i]) (ops[i].forward ? f : b) += 1;
    return std::pair{f, b};
  };
  EXPECT_EQ(count(0), (std::pair{5, 5}));
  EXPECT_EQ(count(3), (std::pair{7, 7}));
}

// Each paired piece's all-to-all leaves max(0, A - K') exposed, K' = K / (1 - m / SMs), K the
// paired pass's piece beside it and m the SMs the all-to-all kernels hold while in flight (16 for
// NCCL's, 20 for DeepEP's), and slows that piece by K' - K, or m / SMs x A when A < K'; each piece
// alone leaves A. The step is then shorter than with the all-to-alls on
// the stream, by at most the all-to-all time.
TEST(MoeOverlap, ExposedAllToAllIsTheClosedFormPerPair) {
  test::TempDir dir;
  for (const auto& [mode, sms] : {std::pair{"megatron-1f1b", 16}, std::pair{"dualpipe", 20}}) {
    SCOPED_TRACE(mode);
    const auto s = test::moe_scenario(dir, 4, R"("data": 32, "expert": 16, "moe_a2a_overlap": ")" + std::string(mode) + "\"");
    const auto r = results::simulate(s);
    const auto plain = results::simulate(test::moe_scenario(dir, 4, R"("data": 32, "expert": 16)"));
    const auto compute = cost::price_works(r.plan.graph, s.device, "bf16").seconds;
    const network::Platform platform(s.cluster);
    const double share = static_cast<double>(sms) / 132.0;
    int paired = 0, alone = 0;
    for (const auto& t : r.plan.graph.tasks) {
      if (t.is_collective || t.work < 0) continue;
      const auto w = static_cast<std::size_t>(t.work);
      for (const auto& c : r.plan.graph.works[w].comms) {
        if (c.op != taskgraph::CollectiveOp::AllToAll) continue;
        const double a = network::inline_time(platform, c, r.plan.graph.groups[static_cast<std::size_t>(c.group)]);
        EXPECT_GT(a, 0);
        if (c.hidden_work < 0) {
          ++alone;
          EXPECT_NEAR(r.work_all_to_all_seconds[w], a, 1e-12);
          continue;
        }
        ++paired;
        EXPECT_EQ(c.margin_sms, sms);
        // Beside the piece Megatron-Core's combined 1F1B layer runs it beside (the first all-to-all
        // of a piece is its dispatch forward, its combine's gradient backward).
        const std::string mine = r.plan.graph.works[w].name, other = r.plan.graph.works[static_cast<std::size_t>(c.hidden_work)].name;
        auto ends = [](const std::string& x, const std::string& tail) { return x.size() >= tail.size() && x.substr(x.size() - tail.size()) == tail; };
        EXPECT_NE(mine.substr(0, 3), other.substr(0, 3)) << mine << " beside " << other;
        if (ends(mine, "before dispatch")) {  // dispatch | mlp_bwd
          EXPECT_TRUE(ends(other, " experts")) << other;
        }
        if (mine.rfind("fwd", 0) == 0 && ends(mine, " experts")) {  // combine | pre_dispatch_bwd
          EXPECT_TRUE(ends(other, "after dispatch")) << other;
        }
        if (ends(mine, "before combine")) {  // combine_bwd | pre_dispatch_fwd
          EXPECT_TRUE(ends(other, "before dispatch")) << other;
        }
        if (mine.rfind("bwd", 0) == 0 && ends(mine, " experts")) {  // dispatch_bwd | mlp_fwd
          EXPECT_TRUE(ends(other, " experts")) << other;
        }
        const double k = compute[static_cast<std::size_t>(c.hidden_work)], slowed = k / (1 - share);
        EXPECT_NEAR(r.work_all_to_all_seconds[w], std::max(0.0, a - slowed), 1e-12);
        EXPECT_NEAR(r.work_interference_seconds[w], a >= slowed ? slowed - k : share * a, 1e-12);
      }
    }
    // Two micro-batches, F0 B0 F1 B1: F1 beside B0, F0 and B1 alone; 4 MoE layers, 2 all-to-alls each.
    EXPECT_EQ(paired, 2 * 4 * 2);
    EXPECT_EQ(alone, 2 * 4 * 2);
    for (const auto& t : r.plan.graph.tasks) EXPECT_FALSE(t.is_collective && t.collective().op == taskgraph::CollectiveOp::AllToAll);
    EXPECT_LT(r.all_to_all_s, plain.all_to_all_s);
    EXPECT_LT(r.step_time_s, plain.step_time_s);
    EXPECT_GT(r.step_time_s, plain.step_time_s - plain.all_to_all_s - 1e-9);
    test::expect_parts_sum_to_step(r);
  }
}
