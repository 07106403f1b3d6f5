// Issue 18 item 1: the planner's cost follows distinct work, not passes. A pass's work is built
// once per (chunk, direction, layer run, tensor group), so more micro-batches add tasks but no
// works; and the task graph is the one the string-keyed work table built, field for field.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <set>
#include <string>

#include "models/model_graph.hpp"
#include "strategies/plan.hpp"

using namespace dtsim;

namespace {

models::TransformerSpec small() {
  models::TransformerSpec s;
  s.name = "small";
  s.num_layers = 8;
  s.hidden_size = 512;
  s.num_heads = 8;
  s.num_kv_heads = 8;
  s.ffn_hidden_size = 2048;
  s.seq_len = 512;
  s.vocab_size = 32000;
  return s;
}

strategies::Plan plan(int dp, int tp, int pp, std::int64_t global, const strategies::ParallelismSpec& extra = {}) {
  const auto g = models::build_transformer(small(), {1, 2, models::Attention::Standard, tp, false});
  strategies::ParallelismSpec p = extra;
  p.data = dp;
  p.tensor = tp;
  p.pipeline = pp;
  p.micro_batch = 1;
  strategies::TrainingSpec t;
  t.global_batch = global;
  return strategies::plan_training(g, p, t, {});
}

// FNV-1a over every field of the task graph, so any change in works, groups or tasks shows.
struct Hash {
  std::uint64_t h = 1469598103934665603ull;
  void byte(unsigned char c) { h = (h ^ c) * 1099511628211ull; }
  void u(std::uint64_t v) { for (int i = 0; i < 8; ++i) byte(static_cast<unsigned char>(v >> (8 * i))); }
  void i(std::int64_t v) { u(static_cast<std::uint64_t>(v)); }
  void d(double v) { u(std::bit_cast<std::uint64_t>(v)); }
  void s(const std::string& v) { u(v.size()); for (unsigned char c : v) byte(c); }
  template <class Ids>
  void ints(const Ids& v) { u(v.size()); for (int x : v) i(x); }
};

std::uint64_t graph_hash(const taskgraph::TaskGraph& g) {
  Hash h;
  h.i(g.num_ranks);
  h.u(g.works.size());
  for (const auto& w : g.works) {
    h.s(w.name);
    h.d(w.repeat);
    h.d(w.fixed_seconds);
    h.u(w.kernels.size());
    for (const auto& k : w.kernels) {
      h.s(k.name);
      h.i(static_cast<int>(k.kind));
      // A loss kernel's n (its softmax's row, since it was recorded) is not priced by shape.
      h.i(k.batch), h.i(k.m), h.i(k.kind == models::KernelKind::Memory ? 0 : k.n), h.i(k.k);
      h.d(k.flops), h.d(k.bytes);
      h.i(k.scores);
    }
    h.u(w.comms.size());
    for (const auto& c : w.comms) h.i(static_cast<int>(c.op)), h.i(c.group), h.d(c.bytes), h.d(c.count);
  }
  h.u(g.groups.size());
  for (const auto& grp : g.groups) h.ints(grp);
  h.u(g.tasks.size());
  for (const auto& t : g.tasks) {
    h.i(static_cast<int>(t.category));
    h.s(t.label());
    h.i(t.rank), h.i(t.work), h.i(t.is_collective);
    h.i(static_cast<int>(t.collective().op)), h.i(static_cast<int>(t.collective().algorithm));
    h.ints(t.collective().groups);
    h.d(t.collective().bytes);
    h.ints(t.deps), h.ints(t.any_deps);
    h.i(t.quorum), h.i(t.stream), h.d(t.priority);
    h.ints(t.after_previous_step);
    h.i(t.off_step_order);
  }
  return h.h;
}

strategies::ParallelismSpec interleaved_recompute() {
  strategies::ParallelismSpec p;
  p.schedule = strategies::Schedule::Interleaved;
  p.virtual_stages = 2;
  p.recompute = strategies::Recompute::Full;
  p.sequence_parallel = true;
  return p;
}

strategies::ParallelismSpec zero3() {
  strategies::ParallelismSpec p;
  p.zero_stage = 3;
  return p;
}

strategies::ParallelismSpec priority_every_replica() {
  strategies::ParallelismSpec p;
  p.priority_buckets = true;
  p.all_replicas = true;
  return p;
}

}  // namespace

TEST(PlanWorks, MoreMicroBatchesBuildNoMoreWorks) {
  // 2 stages x 2 tensor ranks x 2 replicas; 4 micro-batches per pipeline, then 64.
  const auto few = plan(2, 2, 2, 8);
  const auto many = plan(2, 2, 2, 128);
  ASSERT_EQ(few.micro_batches, 4);
  ASSERT_EQ(many.micro_batches, 64);
  EXPECT_GT(many.graph.tasks.size(), few.graph.tasks.size() * 8);
  EXPECT_EQ(many.works_built, few.works_built);
  // Forward and backward per stage, each layer's last backward (DDP overlap), the optimizer's.
  EXPECT_LE(many.works_built, 2u * 2u + 10u + 4u);
  EXPECT_EQ(many.graph.works.size(), few.graph.works.size());
}

TEST(PlanWorks, InterleavedChunksBuildWorksPerChunkNotPerMicroBatch) {
  const auto few = plan(1, 2, 2, 4, interleaved_recompute());
  const auto many = plan(1, 2, 2, 64, interleaved_recompute());
  ASSERT_EQ(many.micro_batches, 64);
  EXPECT_EQ(many.works_built, few.works_built);
  EXPECT_LE(many.works_built, 2u * 4u + 4u);  // 4 chunks, two directions
}

// Values recorded from the planner before works were shared per pass (main at 0f593a0, whose
// WorkTable keyed every pass's work by formatted text).
TEST(PlanWorks, TaskGraphsAreThoseOfTheStringKeyedTable) {
  EXPECT_EQ(graph_hash(plan(2, 2, 2, 32).graph), 5463337750525225936ull);
  EXPECT_EQ(graph_hash(plan(1, 2, 2, 16, interleaved_recompute()).graph), 9718043782317735165ull);
  EXPECT_EQ(graph_hash(plan(4, 1, 1, 16, zero3()).graph), 402588807303380285ull);
  // Changed on purpose (was 1198110505968146343): replicas 1-3 now send from their own GPUs
  // (PlanWorks.EveryReplicaSendsFromItsOwnGpus).
  EXPECT_EQ(graph_hash(plan(4, 1, 2, 16, priority_every_replica()).graph), 13498336665274993059ull);
}

// With every replica simulated, each replica's stage-to-stage sends leave from its own GPUs and
// its tensor group all-gathers what arrives. Sends were keyed by stage alone, so all replicas'
// transfers crossed replica 0's NICs (256 replicas of GPT-3 queued on one NIC pair).
TEST(PlanWorks, EveryReplicaSendsFromItsOwnGpus) {
  strategies::ParallelismSpec every;
  every.all_replicas = true;
  const auto p = plan(2, 2, 2, 8, every);
  ASSERT_EQ(p.replicas, 2);
  std::set<int> senders;
  std::set<std::vector<int>> gather_groups;
  for (const auto& t : p.graph.tasks) {
    if (!t.is_collective) continue;
    const auto& grp = p.graph.groups[static_cast<std::size_t>(t.collective().groups.at(0))];
    if (t.collective().op == taskgraph::CollectiveOp::SendRecv) {
      senders.insert(grp.at(0));
      // The send follows the compute that produced its tensor, on the GPU it leaves from.
      const auto& producer = p.graph.tasks[static_cast<std::size_t>(t.deps.at(0))];
      EXPECT_EQ(producer.rank, grp.at(0)) << t.label();
    } else if (t.collective().op == taskgraph::CollectiveOp::AllGather && t.label().rfind("gather ", 0) == 0) {
      gather_groups.insert(grp);
    }
  }
  EXPECT_EQ(senders.size(), 4u);        // 2 stages x 2 replicas
  EXPECT_EQ(gather_groups.size(), 4u);  // each stage's tensor group in each replica
}
