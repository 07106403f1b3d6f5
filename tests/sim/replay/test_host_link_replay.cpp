// PCIe copies as SimGrid flows: two GPUs behind one switch copying at once share its uplink.
#include <gtest/gtest.h>

#include "helpers.hpp"
#include "pipeline_offload_case.hpp"
#include "scenario_helpers.hpp"
#include "sim/network/platform.hpp"
#include "sim/replay/replay.hpp"

using namespace dtsim;

// Two copy tasks, one per GPU, each 1 GB to the host at once, on a node whose two GPUs share a
// PCIe switch with a 32 GB/s uplink: max-min sharing gives each 16 GB/s, so both end at
// 2 GB / 32 GB/s plus the two links' latencies (1 us each), as the analytical price of the
// pair. SimGrid's engine runs once per process: one replay in this test.
TEST(HostLinkReplay, SimGridCopiesShareTheSwitchUplink) {
  auto c = test::flat_cluster(1);
  c.gpus_per_node = 2;
  c.pcie_bandwidth = 32e9;
  c.host_memory_bandwidth = 200e9;
  c.pcie_latency = 1e-6;
  c.gpus_per_pcie_switch = 2;
  const network::Platform pf(c);
  taskgraph::TaskGraph g;
  g.num_ranks = 2;
  for (int gpu : {0, 1}) {
    taskgraph::Work w;
    w.name = "pcie copy";
    w.copy_bytes = 1e9;
    w.copy_group = g.add_group({gpu});
    g.add_compute(gpu, g.add_work(w), taskgraph::Category::Copy, "copy", {});
  }
  const std::vector<double> seconds(g.works.size(), 0.0);
  const auto t = replay::replay_simgrid({g, seconds, pf});
  for (double end : t.end) EXPECT_NEAR(end, 2e9 / 32e9 + 2e-6, 1e-9);
}

// The same on SimGrid, whose host links would share what GPUs share: two pipeline stages on GPUs
// of different nodes copy as one GPU alone (priced analytically here, as SimGrid runs once per
// process; Offload.SimGridRunsCopiesBesideTheGpu checks that both agree on one GPU), and stage 1's
// copies never wait for stage 0's.
TEST(HostLinkReplay, SimGridStagesOnTwoNodesCopyAsOneGpuAlone) {
  const std::string offload = R"(, "activation_offload": true)";
  const auto alone = test::pipeline_offload(1, 1, 1, offload, "analytical");
  const auto r = test::pipeline_offload(2, 2, 1, offload, "simgrid");
  ASSERT_EQ(r.timeline.backend, "simgrid");
  test::expect_copies_as_alone(r, alone);
  test::expect_copies_apart(r);
  test::expect_parts_sum_to_step(r);
}

TEST(HostLinkReplay, SimGridPipelineStagesSendGradientsToTheHostApart) {
  const auto r = test::pipeline_offload(2, 1, 2, R"(, "zero_stage": 1, "offload_optimizer": true)", "simgrid");
  ASSERT_EQ(r.timeline.backend, "simgrid");
  test::expect_copies_apart(r);
  test::expect_parts_sum_to_step(r);
}

// Two stages behind one PCIe switch still share its uplink, in the replay's host links rather
// than on a stream: a copy that overlaps a copy of the other GPU the same way (each direction of
// a link has its own bandwidth) runs at less than 32 GB/s and lasts longer than alone; one that
// overlaps none lasts bytes / 32 GB/s plus two latencies.
TEST(HostLinkReplay, SimGridStagesBehindOneSwitchShareItsUplink) {
  const auto r = test::pipeline_offload(2, 1, 2, R"(, "activation_offload": true)", "simgrid", R"(, "pcie": {"gpus_per_switch": 2})");
  ASSERT_EQ(r.timeline.backend, "simgrid");
  test::expect_copies_apart(r);
  test::expect_parts_sum_to_step(r);
  const auto& g = r.plan.graph;
  std::vector<std::size_t> copies;
  for (std::size_t i = 0; i < g.tasks.size(); ++i)
    if (g.tasks[i].category == taskgraph::Category::Copy) copies.push_back(i);
  auto to_host = [&](std::size_t i) { return g.works[static_cast<std::size_t>(g.tasks[i].work)].copy_to_host; };
  int shared = 0, apart = 0;
  for (std::size_t i : copies) {
    bool overlaps = false;
    for (std::size_t j : copies)
      overlaps = overlaps || (g.tasks[j].rank != g.tasks[i].rank && to_host(i) == to_host(j) &&
                              r.timeline.start[j] < r.timeline.end[i] - 1e-9 && r.timeline.start[i] < r.timeline.end[j] - 1e-9);
    const double alone = g.works[static_cast<std::size_t>(g.tasks[i].work)].copy_bytes / 32e9 + 2e-6;
    const double took = r.timeline.end[i] - r.timeline.start[i];
    if (overlaps) {
      EXPECT_GT(took, alone + 1e-9) << g.tasks[i].label();
      ++shared;
    } else {
      EXPECT_NEAR(took, alone, 1e-9) << g.tasks[i].label();
      ++apart;
    }
  }
  EXPECT_GT(shared, 0);
  EXPECT_GT(apart, 0);
}
