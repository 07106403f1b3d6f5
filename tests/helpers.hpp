#pragma once
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>
#include <unistd.h>

#include "sim/network/platform.hpp"
#include "sim/taskgraph/task_graph.hpp"

namespace dtsim::test {

// A fresh directory under the system temp dir, removed with the object.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("dtsim-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name, const std::string& content) const {
    auto p = path_ / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << content;
    return p.string();
  }
  std::string path(const std::string& name = "") const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline std::string source_dir() { return DTSIM_SOURCE_DIR; }

// A valid scenario: GPT-2 small on one 8-GPU node, data parallel.
inline const char* kValidScenario = R"({
  "schema_version": 1, "name": "test",
  "model": {"preset": "gpt2"},
  "hardware": {"device": "a100-sxm-80gb"},
  "cluster": {"nodes": 1, "gpus_per_node": 8,
              "intra_node": {"bandwidth_GBps": 300, "latency_us": 2},
              "inter_node": {"nics_per_node": 8, "nic_bandwidth_GBps": 25, "latency_us": 5}},
  "parallelism": {"data": 8, "micro_batch_size": 4},
  "training": {"global_batch_size": 64}
})";

// One GPU per node, one 25 GB/s NIC each, one switch: a uniform ring (alpha 5 us).
inline network::ClusterSpec flat_cluster(int p) {
  network::ClusterSpec c;
  c.nodes = p;
  c.gpus_per_node = 1;
  c.intra_bandwidth = 300e9;
  c.intra_latency = 2e-6;
  c.nics_per_node = 1;
  c.nic_bandwidth = 25e9;
  c.inter_latency = 5e-6;
  c.topology = network::Topology::SingleSwitch;
  return c;
}

// Three 1 GB all-reduces on 8 GPUs of one stream: "a" is ready at once, "b" and "c" when 1 ms
// and 2 ms of compute end, while "a" still runs. "c" has the lower priority value.
inline taskgraph::TaskGraph three_on_a_stream() {
  taskgraph::TaskGraph g;
  g.num_ranks = 8;
  taskgraph::Work one_ms, two_ms;
  one_ms.name = "1 ms";
  two_ms.name = "2 ms";
  const int w1 = g.add_work(one_ms), w2 = g.add_work(two_ms);
  const int grp = g.add_group({0, 1, 2, 3, 4, 5, 6, 7});
  const int t1 = g.add_compute(0, w1, taskgraph::Category::Compute, "b ready", {});
  const int t2 = g.add_compute(1, w2, taskgraph::Category::Compute, "c ready", {});
  taskgraph::Collective c{taskgraph::CollectiveOp::AllReduce, taskgraph::Algorithm::Ring, {grp}, 1e9};
  for (auto [label, dep, priority] : {std::tuple{"a", -1, 5.0}, std::tuple{"b", t1, 3.0}, std::tuple{"c", t2, 1.0}}) {
    const int id = g.add_collective(c, label, dep < 0 ? std::vector<int>{} : std::vector<int>{dep});
    g.tasks[static_cast<std::size_t>(id)].stream = 0;
    g.tasks[static_cast<std::size_t>(id)].priority = priority;
  }
  return g;
}

}  // namespace dtsim::test
