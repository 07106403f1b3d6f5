// Issue 18: GPT-3 175B on 16,384 GPUs with every replica simulated is 2.3 million tasks, under
// 500 MB in all. A task is 72 bytes: labels and collectives are stored once per graph and
// shared, id lists are compact. What a user of the graph relies on stays as it was.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "sim/results/steps.hpp"
#include "sim/taskgraph/task_graph.hpp"

using namespace dtsim;
using taskgraph::Collective;
using taskgraph::CollectiveOp;
using taskgraph::RareTaskIds;
using taskgraph::TaskGraph;
using taskgraph::TaskIds;

TEST(TaskIds, KeepsTwoInsideThenGrowsOnTheHeap) {
  static_assert(sizeof(TaskIds) == 12 && sizeof(RareTaskIds) == 8);
  TaskIds ids;
  std::vector<int> want;
  for (int i = 0; i < 100; ++i) {
    ids.push_back(i * 7);
    want.push_back(i * 7);
    ASSERT_EQ(ids.size(), want.size());
    ASSERT_EQ(ids, want);
  }
  TaskIds copy = ids;
  copy[0] = -1;
  EXPECT_EQ(ids[0], 0);  // a copy owns its ids
  TaskIds moved = std::move(copy);
  EXPECT_TRUE(copy.empty());  // NOLINT(bugprone-use-after-move): a moved-from list is empty
  EXPECT_EQ(moved.at(0), -1);
  EXPECT_EQ(moved.size(), 100u);
  EXPECT_THROW((void)moved.at(100), std::out_of_range);
  moved = TaskIds{3, 4};
  EXPECT_EQ(moved, (std::vector<int>{3, 4}));
  moved = ids;
  EXPECT_EQ(moved, ids);
  for (int& d : moved) d += 1;  // shifted, as repeat_steps shifts each copy's deps
  EXPECT_EQ(moved[99], 99 * 7 + 1);
}

TEST(TaskIds, RareListIsEmptyUntilUsed) {
  RareTaskIds r;
  EXPECT_TRUE(r.empty());
  EXPECT_EQ(r.begin(), r.end());
  r.push_back(5);
  r = std::vector<int>{1, 2, 3};
  RareTaskIds copy = r;
  copy.push_back(4);
  EXPECT_EQ(r, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(copy, (std::vector<int>{1, 2, 3, 4}));
  r.clear();
  EXPECT_TRUE(r.empty());
}

TEST(TaskGraph, TaskTakes72Bytes) {
  // 2.3 million tasks: 166 MB. A task with its label, collective and lists inline took 216
  // bytes and a heap block or two more.
  EXPECT_LE(sizeof(taskgraph::Task), 72u);
}

TEST(TaskGraph, EachDistinctCollectiveAndLabelIsStoredOnce) {
  TaskGraph g;
  const int grp = g.add_group({0, 1});
  const int a = g.add_compute(0, 0, taskgraph::Category::Compute, "fwd c0 mb0", {});
  const int b = g.add_collective({CollectiveOp::SendRecv, taskgraph::Algorithm::Ring, {grp}, 1e6}, "send act c0 mb0", {a});
  const int c = g.add_collective({CollectiveOp::SendRecv, taskgraph::Algorithm::Ring, {grp}, 1e6}, "send act c0 mb0", {b});
  const int d = g.add_collective({CollectiveOp::SendRecv, taskgraph::Algorithm::Ring, {grp}, 2e6}, "send act c0 mb1", {c});
  Collective zero{CollectiveOp::AllReduce, taskgraph::Algorithm::Ring, {grp}, 0.0};
  Collective minus_zero = zero;
  minus_zero.bytes = -0.0;
  const int e = g.add_collective(zero, "x", {});
  const int f = g.add_collective(minus_zero, "x", {});
  const auto& t = g.tasks;
  EXPECT_EQ(&t[b].collective(), &t[c].collective());
  EXPECT_EQ(&t[b].label(), &t[c].label());
  EXPECT_NE(&t[c].collective(), &t[d].collective());
  EXPECT_NE(&t[e].collective(), &t[f].collective());  // told apart by their bits
  EXPECT_TRUE(std::signbit(t[f].collective().bytes));
  EXPECT_EQ(t[d].collective().bytes, 2e6);
  EXPECT_EQ(t[d].label(), "send act c0 mb1");
  EXPECT_EQ(t[c].deps, (std::vector<int>{b}));
  // A compute task reads as one without a collective, as before.
  EXPECT_EQ(t[a].collective().groups.size(), 0u);
  EXPECT_EQ(t[a].collective().bytes, 0.0);
  EXPECT_EQ(taskgraph::Task{}.label(), "");
}

TEST(TaskGraph, TasksCopiedToAnEmptyCopyOutliveTheOriginal) {
  TaskGraph copy;
  {
    TaskGraph g;
    g.num_ranks = 2;
    const int grp = g.add_group({0, 1});
    g.add_collective({CollectiveOp::AllReduce, taskgraph::Algorithm::Ring, {grp}, 8.0}, "all_reduce bucket 0", {});
    copy = g.empty_copy();
    copy.tasks = g.tasks;
  }
  copy.add_compute(0, 0, taskgraph::Category::Compute, "fwd", {0});
  EXPECT_EQ(copy.num_ranks, 2);
  EXPECT_EQ(copy.tasks[0].label(), "all_reduce bucket 0");
  EXPECT_EQ(copy.tasks[0].collective().bytes, 8.0);
  EXPECT_EQ(copy.groups.at(0), (std::vector<int>{0, 1}));
  EXPECT_EQ(copy.tasks[1].label(), "fwd");
}

// The per-(step, GPU) table gives each compute task the multiplier a per-task draw gave it:
// draws in (step, GPU) order from one seeded generator, a GPU's constant slowdown on top, and
// every other task 1.
TEST(TaskScales, OneDrawPerStepAndGpuForItsComputeTasks) {
  TaskGraph one;
  one.num_ranks = 8;
  const int grp = one.add_group({3, 5});
  const int x = one.add_compute(5, 0, taskgraph::Category::Compute, "fwd", {});
  const int y = one.add_compute(3, 0, taskgraph::Category::Compute, "fwd", {});
  one.add_collective({CollectiveOp::AllReduce, taskgraph::Algorithm::Ring, {grp}, 8.0}, "all_reduce", {x, y});
  one.add_compute(5, 0, taskgraph::Category::Optimizer, "step", {2});
  one.add_compute(5, 0, taskgraph::Category::Compute, "fwd 2", {3});
  std::vector<int> step_of;
  const auto g = results::repeat_steps(one, 3, step_of);
  faults::StragglerSpec s;
  s.enabled = true;
  s.seed = 11;
  s.jitter = faults::Jitter::Lognormal;
  s.sigma = 0.1;
  s.slow_gpus = {{5, 2.0}};
  const auto scales = results::task_scales(g, step_of, 3, s);

  std::mt19937_64 rng(11);
  auto uniform = [&] { return (static_cast<double>(rng() >> 11) + 0.5) / 9007199254740992.0; };
  std::map<std::pair<int, int>, double> want;
  for (int k = 0; k < 3; ++k)
    for (int gpu : {3, 5}) {
      const double u1 = uniform(), u2 = uniform();
      want[{k, gpu}] = std::exp(0.1 * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2)) * (gpu == 5 ? 2.0 : 1.0);
    }
  ASSERT_EQ(g.tasks.size(), 15u);
  for (std::size_t i = 0; i < g.tasks.size(); ++i) {
    const auto& t = g.tasks[i];
    const bool compute = !t.is_collective && t.category == taskgraph::Category::Compute;
    EXPECT_EQ(scales.of(t, i), compute ? want.at({step_of[i], t.rank}) : 1.0) << i;
  }
  // One step: no step list needed.
  const std::vector<int> none;
  const auto single = results::task_scales(one, none, 1, s);
  EXPECT_EQ(single.of(one.tasks[0], 0), single.of(one.tasks[4], 4));
  EXPECT_EQ(single.of(one.tasks[3], 3), 1.0);
}

// Tensor 2: compute stands on GPUs 0 and 2 for the groups {0, 1} and {2, 3}. Every member draws,
// in (step, GPU) order, and each group's multiplier is its members' maximum; the report names
// the member that set it.
TEST(TaskScales, AGroupRunsAtItsSlowestMembersDraw) {
  TaskGraph one;
  one.num_ranks = 4;
  one.add_compute(0, 0, taskgraph::Category::Compute, "fwd", {});
  one.add_compute(2, 0, taskgraph::Category::Compute, "fwd", {});
  std::vector<int> step_of;
  const auto g = results::repeat_steps(one, 3, step_of);
  faults::StragglerSpec s;
  s.enabled = true;
  s.seed = 7;
  s.jitter = faults::Jitter::Exponential;
  s.mean = 0.2;
  s.slow_gpus = {{3, 1.3}};
  const auto scales = results::task_scales(g, step_of, 3, s, 2);

  std::mt19937_64 rng(7);
  auto uniform = [&] { return (static_cast<double>(rng() >> 11) + 0.5) / 9007199254740992.0; };
  std::map<std::pair<int, int>, double> drawn;
  for (int k = 0; k < 3; ++k)
    for (int gpu = 0; gpu < 4; ++gpu) drawn[{k, gpu}] = (1.0 - 0.2 * std::log(uniform())) * (gpu == 3 ? 1.3 : 1.0);
  ASSERT_EQ(g.tasks.size(), 6u);
  for (std::size_t i = 0; i < g.tasks.size(); ++i) {
    const int k = step_of[i], rep = g.tasks[i].rank;
    const double a = drawn.at({k, rep}), b = drawn.at({k, rep + 1});
    EXPECT_EQ(scales.of(g.tasks[i], i), std::max(a, b)) << i;
    EXPECT_EQ(scales.pacer_of(static_cast<std::size_t>(k), rep), b > a ? rep + 1 : rep) << i;
  }
}

// Throttles of a group's members move to its first GPU; where two overlap the slower holds.
TEST(TaskScales, ThrottlesOfAGroupMoveToItsFirstGpu) {
  faults::StragglerSpec s;
  s.throttles = {{5, 0.5, 1.5, 3.0}, {4, 0.0, 1.0, 2.0}, {7, 1.0, 1.0, 4.0}};
  const auto t = results::group_throttles(s, 2);
  ASSERT_EQ(t.size(), 3u);
  auto same = [](const replay::Variability::Throttle& x, int gpu, double start, double duration, double slowdown) {
    return x.gpu == gpu && x.start_s == start && x.duration_s == duration && x.slowdown == slowdown;
  };
  EXPECT_TRUE(same(t[0], 4, 0.0, 0.5, 2.0));
  EXPECT_TRUE(same(t[1], 4, 0.5, 1.5, 3.0));
  EXPECT_TRUE(same(t[2], 6, 1.0, 1.0, 4.0));
  // Groups of one: unchanged.
  const auto alone = results::group_throttles(s, 1);
  ASSERT_EQ(alone.size(), 3u);
  EXPECT_TRUE(same(alone[0], 5, 0.5, 1.5, 3.0));
}
