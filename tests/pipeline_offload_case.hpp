#pragma once
// Offload with pipeline parallelism, the case both replays are checked on: tiny-gpt on A100s
// (PCIe Gen4 x16, 32 GB/s; 1 us of latency on the GPU's PCIe link and 1 us on the host's memory
// link), each pipeline stage on its own GPU with its own copy engines.
#include <algorithm>
#include <string>

#include <gtest/gtest.h>

#include "helpers.hpp"
#include "sim/config/scenario.hpp"
#include "sim/results/result.hpp"

namespace dtsim::test {

// `pipeline` stages over `nodes` nodes of `gpus_per_node` GPUs (`extra` sets data parallelism
// over the rest), 1F1B over 4 micro-batches per replica, `extra` added to the parallelism,
// `cluster_extra` to the cluster and `top_extra` to the scenario, on `backend`.
inline results::Result pipeline_offload(int pipeline, int nodes, int gpus_per_node, const std::string& extra,
                                        const std::string& backend, const std::string& cluster_extra = "",
                                        const std::string& top_extra = "") {
  TempDir dir;
  return results::simulate(config::load_scenario(dir.file("s.json", R"({
    "schema_version": 1, "name": "pipeline-offload",
    "model": {"preset": "tiny-gpt"},
    "hardware": {"device": "a100-sxm-80gb"},
    "cluster": {"nodes": )" + std::to_string(nodes) + R"(, "gpus_per_node": )" + std::to_string(gpus_per_node) + R"(,
                "intra_node": {"bandwidth_GBps": 300, "latency_us": 2},
                "inter_node": {"nics_per_node": 1, "nic_bandwidth_GBps": 25, "latency_us": 5})" + cluster_extra + R"(},
    "parallelism": {"pipeline": )" + std::to_string(pipeline) + R"(, "micro_batch_size": 4)" + extra + R"(},
    "training": {"global_batch_size": )" + std::to_string(16 * nodes * gpus_per_node / pipeline) + R"(},
    "simulation": {"backend": ")" + backend + R"("})" + top_extra + R"(
  })")));
}

// The latest end among a task's dependencies that run on its own GPU: when that GPU alone would
// let the copy start.
inline double own_ready(const results::Result& r, std::size_t i) {
  const auto& g = r.plan.graph;
  double ready = 0;
  for (int d : g.tasks[i].deps)
    if (!g.tasks[static_cast<std::size_t>(d)].is_collective && g.tasks[static_cast<std::size_t>(d)].rank == g.tasks[i].rank)
      ready = std::max(ready, r.timeline.end[static_cast<std::size_t>(d)]);
  return ready;
}

// No copy of one GPU waits for a copy of another (each GPU has its own copy engines), and each
// copy starts as soon as its own GPU lets it.
inline void expect_copies_apart(const results::Result& r) {
  const auto& g = r.plan.graph;
  int copies = 0;
  for (std::size_t i = 0; i < g.tasks.size(); ++i) {
    const auto& t = g.tasks[i];
    if (t.category != taskgraph::Category::Copy) continue;
    ++copies;
    for (int d : t.deps) {
      const auto& dt = g.tasks[static_cast<std::size_t>(d)];
      EXPECT_FALSE(dt.category == taskgraph::Category::Copy && dt.rank != t.rank)
          << t.label() << " on GPU " << t.rank << " waits for " << dt.label() << " on GPU " << dt.rank;
    }
    EXPECT_NEAR(r.timeline.start[i], own_ready(r, i), 1e-9) << t.label() << " on GPU " << t.rank;
  }
  EXPECT_GT(copies, 0);
}

// Each copy of GPUs with a PCIe link and a host of their own lasts bytes / 32 GB/s plus the two
// links' latencies, the same as the copy of the same bytes in `alone`, a one-GPU run.
inline void expect_copies_as_alone(const results::Result& r, const results::Result& alone) {
  auto durations = [](const results::Result& x) {
    std::vector<std::pair<double, double>> out;  // (bytes, seconds)
    const auto& g = x.plan.graph;
    for (std::size_t i = 0; i < g.tasks.size(); ++i)
      if (g.tasks[i].category == taskgraph::Category::Copy)
        out.emplace_back(g.works[static_cast<std::size_t>(g.tasks[i].work)].copy_bytes, x.timeline.end[i] - x.timeline.start[i]);
    return out;
  };
  const auto ref = durations(alone);
  int matched = 0;
  for (const auto& [bytes, seconds] : durations(r)) {
    EXPECT_NEAR(seconds, bytes / 32e9 + 2e-6, 1e-9 * seconds + 1e-15);
    for (const auto& [b, s] : ref)
      if (b == bytes) {
        EXPECT_NEAR(seconds, s, 1e-9 * s);
        ++matched;
        break;
      }
  }
  EXPECT_GT(matched, 0);
}

}  // namespace dtsim::test
