// Where the step goes: kernels that share the GPU, what idle time waited for, the pipeline bubble
// of a uniform pipeline, and the idle time at the gradient sync.
#include <gtest/gtest.h>

#include "helpers.hpp"
#include "scenario_helpers.hpp"
#include "sim/replay/replay.hpp"
#include "sim/results/result.hpp"

using namespace dtsim;

namespace {

void expect_parts_add_up(const replay::Breakdown& b, double total) {
  for (double part :
       {b.compute, b.exposed_communication, b.pipeline_bubble, b.optimizer, b.straggler_wait, b.input_stall, b.stage_imbalance})
    EXPECT_GE(part, 0.0);
  EXPECT_NEAR(b.total(), total, 1e-9 * total);
}

// A GPU whose backward (2 s) runs beside a 0.5 s compression kernel that starts with it, as
// gradient compression's encode kernels do, then a 1 s all-reduce and a 0.25 s update.
struct SideKernel {
  taskgraph::TaskGraph g;
  std::vector<double> seconds{1.0, 2.0, 0.5, 0.25};
  SideKernel() {
    g.num_ranks = 8;
    for (const char* name : {"fwd", "bwd", "compress", "optimizer"}) {
      taskgraph::Work w;
      w.name = name;
      g.add_work(w);
    }
    const int fwd = g.add_compute(0, 0, taskgraph::Category::Compute, "fwd", {});
    const int bwd = g.add_compute(0, 1, taskgraph::Category::Compute, "bwd", {fwd});
    const int enc = g.add_compute(0, 2, taskgraph::Category::Communication, "compress", {fwd});
    const int grp = g.add_group({0, 1, 2, 3, 4, 5, 6, 7});
    // 25 GB/s NICs, 5 us: a 1.75 GB ring all-reduce takes 2 x 7/8 x 1.75e9 / 25e9 + 14 x 5e-6 s.
    const int ar = g.add_collective({taskgraph::CollectiveOp::AllReduce, taskgraph::Algorithm::Ring, {grp}, 1.75e9}, "ar", {enc});
    g.add_compute(0, 3, taskgraph::Category::Optimizer, "optimizer", {bwd, ar});
  }
};

}  // namespace

TEST(Breakdown, KernelsRunningAtOnceShareTheGpuInsteadOfCountingBackwards) {
  SideKernel k;
  const network::Platform pf(test::flat_cluster(8));
  const auto t = replay::replay_analytical({k.g, k.seconds, pf});
  const std::vector<double> no_inline(4, 0.0);
  const auto b = replay::step_breakdown(k.g, t, k.seconds, no_inline);
  expect_parts_add_up(b, t.makespan);
  // [1, 1.5] s: backward and the compression kernel each get half; the all-reduce ends at
  // 1.5 + 0.1226 s, while backward still runs, so nothing else is exposed.
  EXPECT_NEAR(b.compute, 1.0 + 0.25 + 1.5, 1e-12);
  EXPECT_NEAR(b.exposed_communication, 0.25, 1e-12);
  EXPECT_NEAR(b.optimizer, 0.25, 1e-12);
}

TEST(Breakdown, IdleTimeWaitingForACollectiveInFlightIsExposedCommunication) {
  SideKernel k;
  k.seconds = {1.0, 0.1, 0.5, 0.25};  // backward ends before the all-reduce
  const network::Platform pf(test::flat_cluster(8));
  const auto t = replay::replay_analytical({k.g, k.seconds, pf});
  const auto b = replay::step_breakdown(k.g, t, k.seconds, std::vector<double>(4, 0.0));
  expect_parts_add_up(b, t.makespan);
  const double all_reduce = 2 * 7.0 / 8 * 1.75e9 / 25e9 + 14 * 5e-6;
  // Shared [1, 1.1]; compression alone to 1.5; the all-reduce in flight after it.
  EXPECT_NEAR(b.compute, 1.0 + 0.05, 1e-12);
  EXPECT_NEAR(b.exposed_communication, 0.05 + 0.4 + all_reduce, 1e-9);
  EXPECT_EQ(b.pipeline_bubble + b.straggler_wait + b.stage_imbalance, 0.0);
}

namespace {

// 32 GPUs, TP 4 x PP 4 x DP 2, a 4096-hidden 32-layer GPT, 1F1B with m micro-batches.
results::Result pipeline_run(int m) {
  return test::simulate_over_base(R"({"extends": "base.json", "cluster": {"nodes": 4},
      "model": {"preset": null, "kind": "transformer", "num_layers": 32, "hidden_size": 4096, "num_heads": 32, "seq_len": 2048,
                "vocab_size": 51200},
      "parallelism": {"data": 2, "tensor": 4, "pipeline": 4, "micro_batch_size": 1, "pipeline_schedule": "1f1b"},
      "training": {"global_batch_size": )" + std::to_string(2 * m) + R"(},
      "simulation": {"backend": "analytical"}})");
}

// The GPU's own forward and backward passes per micro-batch (tensor-parallel collectives inside).
double pass_time(const results::Result& r, int m) {
  double busy = 0;
  const auto& g = r.replayed();
  for (std::size_t i = 0; i < g.tasks.size(); ++i)
    if (!g.tasks[i].is_collective && g.tasks[i].category == taskgraph::Category::Compute && g.tasks[i].rank == r.breakdown.rank)
      busy += r.timeline.end[i] - r.timeline.start[i];
  return busy / m;
}

}  // namespace

TEST(PipelineBubble, OneFOneBBubbleIsTheFillAndDrainWhateverTheMicroBatches) {
  const int p = 4;
  for (int m : {8, 32, 128}) {
    const auto r = pipeline_run(m);
    expect_parts_add_up(r.breakdown, r.step_time_s);
    const double fill_and_drain = (p - 1) * pass_time(r, m);
    EXPECT_NEAR(r.breakdown.pipeline_bubble / fill_and_drain, 1.0, 0.10) << "m = " << m;
    // Stage-to-stage transfers and their gathers that the GPU waits for are communication.
    EXPECT_GT(r.breakdown.exposed_communication, 0.0);
    // The last stage's LM head makes the others wait: uneven work, not a straggler.
    EXPECT_GT(r.breakdown.stage_imbalance, 0.0) << "m = " << m;
    EXPECT_EQ(r.breakdown.straggler_wait, 0.0) << "m = " << m;
  }
}

TEST(SyncWait, PerBucketUpdatesCountTheIdleTimeOnceAndNeverMoreThanAStep) {
  // One node whose GPUs talk at 2 GB/s (the all-reduce outlasts backward), 4 steps, one update
  // per bucket in priority order.
  const auto r = test::simulate_over_base(R"({"extends": "base.json",
      "cluster": {"intra_node": {"bandwidth_GBps": 2, "latency_us": 2}},
      "parallelism": {"data": 8, "micro_batch_size": 8, "bucket_order": "priority"},
      "simulation": {"backend": "analytical", "steps": 4}})");
  ASSERT_TRUE(r.steps);
  ASSERT_GT(r.plan.gradient_buckets, 2u);
  EXPECT_GT(r.steps->mean_wait_s, 0.0);
  EXPECT_LE(r.steps->max_wait_s, r.step_time_s);
  EXPECT_LE(r.steps->mean_wait_s, r.steps->max_wait_s);
  expect_parts_add_up(r.breakdown, r.step_time_s);
}
