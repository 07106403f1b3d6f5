#pragma once
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "sim/network/platform.hpp"

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

}  // namespace dtsim::test
