#include <gtest/gtest.h>

#include "scenario_helpers.hpp"
#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "sim/network/collectives.hpp"
#include "sim/results/result.hpp"

using namespace dtsim;

namespace {

// GPT-2 small on 8 GPUs (one node), 8 dedicated parameter servers, on links so fast that only
// compute matters, replayed analytically.
std::string scenario(const std::string& parallelism, const std::string& extra = "") {
  return R"({"extends": "base.json", "hardware": {"host_memory_bandwidth_GBps": 1e6},
      "cluster": {"parameter_servers": {"count": 8, "nic_bandwidth_GBps": 1e6}, "inter_node": {"nic_bandwidth_GBps": 1e6}},
      "parallelism": {"data": 8, "micro_batch_size": 4)" + parallelism + R"(},
      "simulation": {"backend": "analytical", "steps": 10})" + extra + "}";
}

results::Result run(const std::string& parallelism, const std::string& extra = "") {
  return test::simulate_over_base(scenario(parallelism, extra));
}

std::string error_of(const std::string& parallelism, const std::string& extra = "") {
  return test::input_error_over_base(scenario(parallelism, extra));
}

const std::string kSlowGpu = R"(, "stragglers": {"slow_gpus": [{"gpu": 3, "slowdown": 2.0}]})";

}  // namespace

TEST(AsyncUpdates, EqualWorkersSeeEveryOtherWorkersUpdateOncePerStep) {
  auto r = run(R"(, "updates": "async")");
  ASSERT_TRUE(r.async);
  // In lockstep the weights take the 8 updates of a round in worker order: in the first round
  // update k is k versions stale, afterwards every update is p - 1 = 7.
  EXPECT_NEAR(r.async->staleness_mean, (9 * 7.0 + 3.5) / 10, 1e-9);
  EXPECT_EQ(r.async->staleness_p50, 7);
  EXPECT_EQ(r.async->staleness_max, 7);
  EXPECT_EQ(r.async->updates, 80u);
}

TEST(AsyncUpdates, ASlowWorkerNoLongerHoldsTheOthersBack) {
  const double calm = run(R"(, "updates": "async")").samples_per_s;
  auto slow = run(R"(, "updates": "async")", kSlowGpu);
  // Seven workers at rate 1/T and one at 1/(2T): 7.5/8 of the calm throughput. Synchronous
  // parameter servers wait for the slow worker every step: about 1/2.
  EXPECT_NEAR(slow.samples_per_s / calm, 7.5 / 8, 0.01);
  const double sync = run(R"(, "all_reduce_algorithm": "parameter-server")", kSlowGpu).samples_per_s;
  EXPECT_NEAR(sync / calm, 0.5, 0.03);
  // The slow worker's gradients are twice as stale: two updates by each other worker per pull.
  EXPECT_EQ(slow.async->staleness_max, 14);
}

TEST(AsyncUpdates, AStalenessBoundMakesFastWorkersWait) {
  const double calm = run(R"(, "updates": "async")").samples_per_s;
  const double free = run(R"(, "updates": "async")", kSlowGpu).samples_per_s;
  const double bound0 = run(R"(, "updates": "async", "staleness_bound": 0)", kSlowGpu).samples_per_s;
  const double bound2 = run(R"(, "updates": "async", "staleness_bound": 2)", kSlowGpu).samples_per_s;
  // Bound 0: step k waits for everyone's step k - 1, so steps take 2T. Fast workers finish their
  // 10th step at 19T, when the slow one has done 9: (7 x 10 + 9) updates in 19T against 8/T.
  EXPECT_NEAR(bound0 / calm, 79.0 / (19 * 8), 0.005);
  EXPECT_GT(bound2, bound0);
  EXPECT_LT(bound2, free);
}

TEST(AsyncUpdates, HogwildAndEasgdGoThroughHostMemory) {
  auto hog = run(R"(, "updates": "hogwild")");
  ASSERT_TRUE(hog.async);
  EXPECT_EQ(hog.scenario_spec.parallelism.algorithm, taskgraph::Algorithm::CentralStorage);
  auto easgd = run(R"(, "updates": "easgd", "easgd_period": 4)");
  ASSERT_TRUE(easgd.async);
  // A simulated step is 4 local steps of every worker, then one exchange each.
  EXPECT_EQ(easgd.plan.iterations_per_step, 4);
  // The workers take turns at the master: each exchange starts when the previous one ended.
  const auto& g = easgd.replayed();
  std::vector<std::size_t> exchanges;
  for (std::size_t i = 0; i < g.tasks.size() && exchanges.size() < 8; ++i)
    if (g.tasks[i].label() == "exchange with centre") exchanges.push_back(i);
  ASSERT_EQ(exchanges.size(), 8u);
  for (std::size_t k = 1; k < exchanges.size(); ++k)
    EXPECT_GE(easgd.timeline.start[exchanges[k]], easgd.timeline.end[exchanges[k - 1]] - 1e-12);
}

TEST(AsyncUpdates, OneWorkerPushesItsShareToEachServerAndPullsItBack) {
  network::ClusterSpec c = test::flat_cluster(4);
  c.ps_servers = 2;
  c.ps_nic_bandwidth = 25e9;
  c.host_memory_bandwidth = 100e9;
  network::Platform pf(c);
  taskgraph::Collective push{taskgraph::CollectiveOp::AllReduce, taskgraph::Algorithm::ParameterServer, {0}, 1e9, 2};
  push.server_apply_factor = 13;
  auto lc = network::lower(pf, push, {{0, 1, 2, 3}});
  ASSERT_EQ(lc.phases.size(), 3u);  // push, the servers' update, pull
  for (std::size_t k : {0u, 2u}) {
    ASSERT_EQ(lc.phases[k].flows.size(), 2u);  // S/2 to (then from) each of the 2 servers, worker 2 alone
    for (const auto& f : lc.phases[k].flows) {
      EXPECT_DOUBLE_EQ(f.bytes, 0.5e9);
      EXPECT_TRUE(f.src == pf.nic_endpoint(2) || f.dst == pf.nic_endpoint(2));
    }
  }
  // Each server runs the optimizer over its half: 13 bytes of traffic per byte received.
  ASSERT_EQ(lc.phases[1].work.size(), 2u);
  for (const auto& w : lc.phases[1].work) EXPECT_DOUBLE_EQ(w.seconds, 13 * 0.5e9 / 100e9);
}

TEST(AsyncUpdates, InputsThatCannotWorkAreErrors) {
  // (Written out: a key given twice is itself an input error.)
  EXPECT_NE(test::input_error_over_base(R"({"extends": "base.json", "simulation": {"steps": 10},
                "parallelism": {"updates": "async", "tensor": 2, "data": 4}})")
                .find("/parallelism/updates"),
            std::string::npos);
  EXPECT_NE(error_of(R"(, "staleness_bound": 2)").find("staleness_bound"), std::string::npos);
  EXPECT_NE(error_of(R"(, "updates": "async", "all_reduce_algorithm": "ring")").find("all_reduce_algorithm"), std::string::npos);
  EXPECT_NE(test::input_error_over_base(R"({"extends": "base.json", "simulation": {"steps": 1},
                "parallelism": {"updates": "async"}})")
                .find("/simulation/steps"),
            std::string::npos);
  EXPECT_EQ(error_of(R"(, "updates": "async")"), "");
}
