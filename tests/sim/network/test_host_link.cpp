// Issue 17: PCIe traffic on the topology. Offload copies are flows from each GPU's PCIe link
// through its PCIe switch's uplink to its host's memory, so GPUs behind one switch share it.
#include <gtest/gtest.h>

#include <string>

#include "helpers.hpp"
#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "sim/network/collectives.hpp"
#include "sim/results/result.hpp"

using namespace dtsim;

namespace {

// One node of two GPUs: 32 GB/s PCIe links, 200 GB/s of host memory, 1 us per link.
network::ClusterSpec two_gpus(int per_switch) {
  auto c = test::flat_cluster(1);
  c.gpus_per_node = 2;
  c.nics_per_node = 1;
  c.pcie_bandwidth = 32e9;
  c.host_memory_bandwidth = 200e9;
  c.pcie_latency = 1e-6;
  c.gpus_per_pcie_switch = per_switch;
  return c;
}

double copy_time(const network::ClusterSpec& c, const std::vector<int>& gpus, bool to_host) {
  const network::Platform pf(c);
  return network::analytical_time(pf, network::lower_host_copy(pf, 1e9, gpus, to_host));
}

}  // namespace

// One GPU alone: 1 GB over its 32 GB/s link (host memory is faster) plus the latencies of its
// PCIe link and the host's memory link, 1 us each. Either way, switch or not.
TEST(HostLink, OneGpuCopiesAtItsLinkBandwidthPlusLatency) {
  for (int per_switch : {1, 2}) {
    EXPECT_DOUBLE_EQ(copy_time(two_gpus(per_switch), {0}, true), 1e9 / 32e9 + 2e-6) << per_switch;
    EXPECT_DOUBLE_EQ(copy_time(two_gpus(per_switch), {1}, false), 1e9 / 32e9 + 2e-6) << per_switch;
  }
}

// Two GPUs behind one switch whose uplink carries one link's worth: 2 GB through 32 GB/s, twice
// one GPU's time less the latency. With a switch each (the old platform) they do not meet
// before host memory, which 2 GB at 200 GB/s does not fill.
TEST(HostLink, TwoGpusSharingASwitchTakeTwiceAsLong) {
  EXPECT_DOUBLE_EQ(copy_time(two_gpus(2), {0, 1}, true), 2e9 / 32e9 + 2e-6);
  EXPECT_DOUBLE_EQ(copy_time(two_gpus(2), {0, 1}, false), 2e9 / 32e9 + 2e-6);
  EXPECT_DOUBLE_EQ(copy_time(two_gpus(1), {0, 1}, true), 1e9 / 32e9 + 2e-6);
  // A wider uplink (a Gen5 switch on Gen4 GPUs) is shared no more than it carries.
  auto wide = two_gpus(2);
  wide.pcie_switch_bandwidth = 64e9;
  EXPECT_DOUBLE_EQ(copy_time(wide, {0, 1}, true), 1e9 / 32e9 + 2e-6);
  // Eight GPUs with their own switches meet at the host: 8 GB at 200 GB/s.
  auto eight = two_gpus(1);
  eight.gpus_per_node = 8;
  EXPECT_DOUBLE_EQ(copy_time(eight, {0, 1, 2, 3, 4, 5, 6, 7}, true), 8e9 / 200e9 + 2e-6);
}

// ZeRO-Offload on the two GPUs of one node, data parallel: each brings its half of the 16-bit
// parameters back up after the host step, both at once. Behind one switch the copy of
// params / 2 x 2 bytes takes twice as long as with a switch each.
TEST(HostLink, OffloadCopiesOfTwoGpusOnOneSwitchContend) {
  auto run = [](int per_switch) {
    test::TempDir dir;
    return results::simulate(config::load_scenario(dir.file("s.json", R"({
      "schema_version": 1, "name": "offload-2",
      "model": {"preset": "tiny-gpt"},
      "hardware": {"device": "a100-sxm-80gb"},
      "cluster": {"nodes": 1, "gpus_per_node": 2, "intra_node": {"bandwidth_GBps": 300, "latency_us": 2},
                  "inter_node": {"nics_per_node": 1, "nic_bandwidth_GBps": 25, "latency_us": 5},
                  "pcie": {"gpus_per_switch": )" + std::to_string(per_switch) + R"(, "latency_us": 1}},
      "parallelism": {"data": 2, "micro_batch_size": 4, "zero_stage": 2, "offload_optimizer": true},
      "training": {"global_batch_size": 16, "precision": "bf16"},
      "simulation": {"backend": "analytical"}
    })")));
  };
  const auto shared = run(2), own = run(1);
  auto up = [](const results::Result& r) {
    for (std::size_t i = 0; i < r.plan.graph.tasks.size(); ++i)
      if (r.plan.graph.tasks[i].label() == "parameters to GPU") return r.timeline.end[i] - r.timeline.start[i];
    return -1.0;
  };
  const double bytes = shared.params / 2 * 2.0, pcie = 32e9;  // a100-sxm-80gb: PCIe Gen4 x16
  EXPECT_NEAR(up(own), bytes / pcie + 2e-6, 1e-3 * up(own));
  EXPECT_NEAR(up(shared) - 2e-6, 2 * (up(own) - 2e-6), 1e-12);
  EXPECT_GT(shared.step_time_s, own.step_time_s);
}

TEST(HostLink, SwitchesMustSplitTheNode) {
  test::TempDir dir;
  try {
    config::load_scenario(dir.file("s.json", R"({
      "schema_version": 1, "name": "bad",
      "model": {"preset": "tiny-gpt"},
      "hardware": {"device": "a100-sxm-80gb"},
      "cluster": {"nodes": 1, "gpus_per_node": 4, "intra_node": {"bandwidth_GBps": 300, "latency_us": 2},
                  "inter_node": {"nics_per_node": 1, "nic_bandwidth_GBps": 25, "latency_us": 5},
                  "pcie": {"gpus_per_switch": 3}},
      "training": {"global_batch_size": 16}
    })"));
    FAIL() << "accepted 3 GPUs per switch on a 4-GPU node";
  } catch (const InputError& e) {
    EXPECT_EQ(e.pointer(), "/cluster/pcie/gpus_per_switch");
  }
}
