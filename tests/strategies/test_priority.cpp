// Bucket priority order: the stream that orders collectives, steps that wait on the previous
// step's updates, and what priority order buys a communication-bound job.
#include <gtest/gtest.h>

#include "scenario_helpers.hpp"
#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "sim/replay/replay.hpp"
#include "sim/results/result.hpp"
#include "sim/results/steps.hpp"

using namespace dtsim;

namespace {

std::string scenario(const std::string& parallelism, const std::string& simulation = R"("steps": 4)") {
  // One node whose GPUs talk at 2 GB/s: the gradient all-reduce takes longer than backward.
  return R"({"extends": "base.json",
      "cluster": {"intra_node": {"bandwidth_GBps": 2, "latency_us": 2}},
      "parallelism": {"data": 8, "micro_batch_size": 8)" + parallelism + R"(},
      "simulation": {"backend": "analytical", )" + simulation + "}}";
}

results::Result run(const std::string& parallelism) { return test::simulate_over_base(scenario(parallelism)); }

std::string error_of(const std::string& parallelism, const std::string& simulation = R"("steps": 4)") {
  return test::input_error_over_base(scenario(parallelism, simulation));
}

}  // namespace

TEST(CollectiveStream, TheWaitingOneWithTheLowestPriorityGoesNext) {
  const auto g = test::three_on_a_stream();
  const std::vector<double> seconds{1e-3, 2e-3};
  const network::Platform pf(test::flat_cluster(8));
  const auto t = replay::replay_analytical({g, seconds, pf});
  const double one = t.end[2] - t.start[2];  // "a"
  ASSERT_GT(one, 2e-3);                       // both others are waiting when it ends
  EXPECT_DOUBLE_EQ(t.start[4], t.end[2]);     // "c" first
  EXPECT_DOUBLE_EQ(t.start[3], t.end[4]);     // then "b"
  EXPECT_NEAR(t.makespan, 3 * one, 1e-12);
}

TEST(RepeatSteps, ATaskCanWaitForItsPreviousStepCopyInsteadOfTheWholeStep) {
  taskgraph::TaskGraph one;
  one.num_ranks = 1;
  taskgraph::Work w;
  w.name = "w";
  const int work = one.add_work(w);
  const int fwd = one.add_compute(0, work, taskgraph::Category::Compute, "fwd", {});
  const int bwd = one.add_compute(0, work, taskgraph::Category::Compute, "bwd", {fwd});
  const int upd = one.add_compute(0, work, taskgraph::Category::Optimizer, "update", {bwd});
  one.tasks[static_cast<std::size_t>(upd)].off_step_order = true;
  one.tasks[static_cast<std::size_t>(fwd)].after_previous_step = {upd};
  std::vector<int> step_of;
  const auto g = results::repeat_steps(one, 2, step_of);
  ASSERT_EQ(g.tasks.size(), 6u);
  // The second forward follows the first backward on the GPU and waits for the first update.
  EXPECT_EQ(g.tasks[3].deps, (std::vector<int>{upd, bwd}));
}

TEST(PriorityBuckets, OverlapTheNextForwardWithTheLastBucketsWhenCommunicationBound) {
  const auto fifo = run("");
  const auto priority = run(R"(, "bucket_order": "priority")");
  EXPECT_LT(priority.step_time_s, 0.97 * fifo.step_time_s);
  // Communication alone bounds a step from below: the stream still carries every bucket.
  EXPECT_GT(priority.step_time_s, 0.5 * fifo.step_time_s);
  EXPECT_EQ(priority.plan.gradient_buckets, fifo.plan.gradient_buckets);
  std::size_t updates = 0;
  for (const auto& t : priority.repeated.tasks) updates += t.category == taskgraph::Category::Optimizer ? 1 : 0;
  EXPECT_EQ(updates, 4 * priority.plan.gradient_buckets);  // one per bucket and step
}

TEST(PriorityBuckets, InputsThatCannotWorkAreErrors) {
  EXPECT_EQ(error_of(R"(, "bucket_order": "sometimes")").substr(0, 26), "/parallelism/bucket_order:");
  // (Written out: a key given twice is itself an input error.)
  EXPECT_NE(test::input_error_over_base(R"({"extends": "base.json", "simulation": {"steps": 4},
                "parallelism": {"data": 4, "tensor": 2, "bucket_order": "priority"}})")
                .find("synchronous data parallelism"),
            std::string::npos);
  EXPECT_NE(error_of(R"(, "overlap_grad_reduce": false, "bucket_order": "priority")").find("overlap_grad_reduce"),
            std::string::npos);
  EXPECT_NE(error_of(R"(, "bucket_order": "priority")", R"("steps": 1)").find("2 or more"), std::string::npos);
}
