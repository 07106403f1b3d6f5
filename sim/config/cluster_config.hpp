#pragma once
#include <cstdint>
#include <string>

#include "sim/config/scenario.hpp"
#include "sim/core/json_reader.hpp"

namespace dtsim::config {

// Bounds a cluster's size and each parallelism degree alike.
inline constexpr std::int64_t kMaxGpus = 1 << 20;

// The scenario's `cluster` object (a preset already expanded into it): nodes, links, topology,
// parameter servers, PCIe tree and background traffic; `roles` (chief, evaluator) into `roles`.
network::ClusterSpec parse_cluster(Reader r, const std::string& preset, Roles& roles);

}  // namespace dtsim::config
