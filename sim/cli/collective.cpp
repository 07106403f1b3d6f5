#include <fmt/format.h>

#include <cmath>

#include <iostream>
#include <nlohmann/json.hpp>

#include "sim/cli/collective_nccl.hpp"
#include "sim/cli/commands.hpp"
#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "sim/network/algorithm_registry.hpp"
#include "sim/network/collectives.hpp"
#include "sim/replay/replay.hpp"
#include "sim/results/budget.hpp"

namespace dtsim::cli {

namespace {

constexpr int kMaxRows = 200;

// nccl-tests size syntax: a number with an optional K, M or G (powers of 1024).
double parse_size(const std::string& text, const char* flag) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    throw InputError("", flag, fmt::format("\"{}\" is not a size (e.g. 8, 64K, 128M, 8G)", text));
  }
  std::string unit = text.substr(used);
  double scale = unit.empty() ? 1 : unit == "K" ? 1024.0 : unit == "M" ? 1048576.0 : unit == "G" ? 1073741824.0 : -1;
  if (scale < 0 || !(v > 0) || v * scale > 1e15)
    throw InputError("", flag, fmt::format("\"{}\" is not a size between 1 byte and 1 PB (e.g. 8, 64K, 128M, 8G)", text));
  return v * scale;
}

network::ClusterSpec default_cluster(int gpus, int per_node) {
  // A DGX A100-like cluster (hardware_profiles/clusters/dgx-a100.json's numbers).
  network::ClusterSpec c;
  c.name = "default";
  c.gpus_per_node = std::min(per_node, gpus);
  c.nodes = gpus / c.gpus_per_node;
  c.intra_bandwidth = 300e9;
  c.intra_latency = 3e-6;
  c.intra_efficiency = 0.772;
  c.nics_per_node = c.gpus_per_node;
  c.nic_bandwidth = 25e9;
  c.inter_latency = 5e-6;
  return c;
}

struct Participants {
  network::ClusterSpec cluster;
  int gpus = 0;
  std::string device = "simulated GPU";  // the scenario's, for nccl-tests' "Using devices" lines
};

// --scenario's cluster or the default one, and how many of its GPUs take part.
Participants participants(const CollectiveOptions& o) {
  Participants p;
  if (!o.scenario.empty()) {
    const auto s = config::load_scenario(o.scenario);
    p.cluster = s.cluster;
    p.device = s.device.name;
  }
  // Without --gpus, a borrowed cluster's every GPU: a torus runs its dimension-by-dimension rings
  // only over all of its chips.
  p.gpus = o.gpus > 0 ? o.gpus : !o.scenario.empty() ? p.cluster.num_gpus() : 8;
  if (o.scenario.empty()) {
    if (p.gpus % std::min(o.gpus_per_node, p.gpus) != 0)
      throw InputError("", "--gpus", fmt::format("{} GPUs do not fill nodes of {}", p.gpus, o.gpus_per_node));
    p.cluster = default_cluster(p.gpus, o.gpus_per_node);
  }
  if (p.gpus > p.cluster.num_gpus())
    throw InputError("", "--gpus", fmt::format("{} GPUs asked, the cluster has {}", p.gpus, p.cluster.num_gpus()));
  return p;
}

}  // namespace

int collective(const CollectiveOptions& o) {
  const auto op = taskgraph::op_from_string(o.op);
  if (!op) throw InputError("", "--op", fmt::format("unknown operation \"{}\"", o.op));
  const std::string algorithm_name = !o.algorithm.empty() ? o.algorithm : *op == taskgraph::CollectiveOp::AllToAll ? "direct" : "ring";
  const auto algorithm = network::algorithm_named(algorithm_name);
  if (!algorithm) throw InputError("", "--algorithm", fmt::format("unknown algorithm \"{}\"", o.algorithm));
  const auto [cluster, gpus, device] = participants(o);
  const double begin = parse_size(o.min_bytes, "-b"), end = parse_size(o.max_bytes, "-e");
  if (begin > end) throw InputError("", "-b", "the smallest size is larger than the largest (-e)");
  if (!(o.factor > 1.0) || !std::isfinite(o.factor)) throw InputError("", "-f", "the size factor must be greater than 1");
  // Count the rows before building them: a factor of 1.0000000001 would make billions.
  const double count = std::floor(std::log(end * (1 + 1e-12) / begin) / std::log(o.factor)) + 1;
  if (count > kMaxRows)
    throw InputError("", "-f", fmt::format("{:.0f} sizes from {} to {} by a factor of {} are more than {}; use a larger factor",
                                           count, o.min_bytes, o.max_bytes, o.factor, kMaxRows));
  results::check_collective_budget(cluster, *op, *algorithm, gpus, count, o.analytical);

  network::Platform platform(cluster);
  taskgraph::TaskGraph g;
  g.num_ranks = cluster.num_gpus();
  std::vector<int> ranks;
  for (int i = 0; i < gpus; ++i) ranks.push_back(i);
  const int group = g.add_group(ranks);
  std::vector<double> sizes;
  for (double s = begin; s <= end * (1 + 1e-12); s *= o.factor) sizes.push_back(std::floor(s));
  // One collective after another in a single simulation: SimGrid runs once per process.
  int prev = -1;
  for (double s : sizes) {
    prev = g.add_collective({*op, *algorithm, {group}, s}, fmt::format("{} {}", o.op, s),
                            prev < 0 ? std::vector<int>{} : std::vector<int>{prev});
    try {
      (void)network::lower(platform, *op, *algorithm, s, ranks);
    } catch (const std::invalid_argument& e) {
      throw InputError("", "--algorithm", e.what());
    }
  }
  std::vector<double> none;
  replay::ReplayInput in{g, none, platform};
  const auto t = o.analytical ? replay::replay_analytical(in) : replay::replay_simgrid(in);

  const double factor = network::bus_bandwidth_factor(*op, gpus);
  if (o.format == "nccl-tests") {
    NcclTable table{*op, gpus, cluster.gpus_per_node, begin, end, o.factor, device, {}};
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      const double secs = t.end[i] - t.start[i], algbw = secs > 0 ? sizes[i] / secs / 1e9 : 0.0;
      table.rows.push_back({sizes[i], secs * 1e6, algbw, algbw * factor});
    }
    std::cout << nccl_tests_table(table);
    return 0;
  }
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  if (o.format != "json")
    std::cout << fmt::format("# {} {} on {} GPUs ({} per node), {} backend\n", o.op, algorithm_name, gpus,
                             cluster.gpus_per_node, t.backend)
              << fmt::format("{:>13} {:>12} {:>6} {:>12} {:>11} {:>11}\n", "size", "count", "type", "time_us", "algbw_GBps",
                             "busbw_GBps");
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const double secs = t.end[i] - t.start[i];
    const double algbw = secs > 0 ? sizes[i] / secs / 1e9 : 0.0;
    rows.push_back({{"size_bytes", sizes[i]}, {"time_us", secs * 1e6}, {"algbw_GBps", algbw}, {"busbw_GBps", algbw * factor}});
    // Across nodes with NCCL's tuning model: the algorithm and protocol NCCL would pick, and its time.
    const auto nccl = network::nccl_prediction(platform, *op, sizes[i], ranks);
    std::string pick;
    if (nccl) {
      pick = fmt::format("{}/{}", network::nccl::to_string(nccl->algo), network::nccl::to_string(nccl->proto));
      rows.back()["nccl"] = {{"algorithm", network::nccl::to_string(nccl->algo)},
                             {"protocol", network::nccl::to_string(nccl->proto)}, {"time_us", nccl->time_us}};
    }
    if (o.format != "json")
      std::cout << fmt::format("{:>13.0f} {:>12.0f} {:>6} {:>12.2f} {:>11.2f} {:>11.2f}{}\n", sizes[i], sizes[i] / 4, "float",
                               secs * 1e6, algbw, algbw * factor,
                               nccl ? fmt::format("  NCCL {} {:.2f} us", pick, nccl->time_us) : "");
  }
  if (o.format == "json")
    std::cout << nlohmann::ordered_json{{"op", o.op}, {"algorithm", algorithm_name}, {"gpus", gpus},
                                        {"backend", t.backend}, {"rows", rows}}.dump(2)
              << "\n";
  return 0;
}

}  // namespace dtsim::cli
