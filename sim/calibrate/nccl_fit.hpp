#pragma once
// Link bandwidth and latency per tier from nccl-tests tables, through dtsim's own collective cost
// model: each row is priced as the analytical backend prices that collective (the algorithm's
// lowering, sim/network/algorithms/*.cpp, timed by network::analytical_time, with whatever the
// cluster adds: efficiency by size, NCCL's tuning floor, NVLink SHARP). Where that price is
// alpha-beta in the tier's latency and 1/bandwidth (ring, tree, direct, chain on one tier) one
// closed-form least-squares solve is the fit; where the model bends (a floor, a max between
// tiers) the same solve repeats from the base's values on its local slopes until nothing moves.
#include <string>
#include <vector>

#include "sim/calibrate/nccl_tests_parse.hpp"
#include "sim/network/platform.hpp"

namespace dtsim::calibrate {

enum class Tier { IntraNode, InterNode };
const char* to_string(Tier t);

// Which GPU of the cluster each rank ran on: hosts in the order their ranks appear become nodes
// 0, 1, ...; a host's ranks its GPUs 0, 1, ... InputError when a host ran more ranks than a node
// of the cluster has GPUs.
struct Placement {
  int nodes = 1;
  std::vector<int> gpus;  // by rank
};
Placement place(const network::ClusterSpec& cluster, const NcclTestsFile& f);

// Seconds dtsim's analytical backend gives the file's collective of `bytes` on those GPUs
// (`cluster` with as many nodes as the placement uses). sendrecv_perf: every rank sends to the
// next and receives from the one before, at once (nccl-tests src/sendrecv.cu).
double collective_seconds(const network::ClusterSpec& cluster, const NcclTestsFile& f, const Placement& p, double bytes);

// What one tier's fit found: the profile's fields before and after, and why one was kept.
struct TierFit {
  Tier tier = Tier::IntraNode;
  int rows = 0;
  double base_latency_s = 0, base_bandwidth = 0;  // the base's field values (bandwidth in B/s)
  double latency_s = 0, bandwidth = 0;            // fitted (or kept)
  bool latency_fitted = false, bandwidth_fitted = false;
  int solves = 0;    // closed-form solves until the fixed point
  std::string note;  // why a value was kept, in words; empty when both were fitted
};

struct RowFit {
  std::size_t file = 0;
  int line = 0;
  double size = 0, measured_s = 0, base_s = 0, fitted_s = 0;
};

struct CollectiveFit {
  network::ClusterSpec cluster;  // the base with the fitted fields
  std::vector<TierFit> tiers;    // the tiers some file measured: inside a node first
  std::vector<RowFit> rows;      // every row of every file, in order
  std::vector<std::string> runs_as;  // per file: what its largest row runs as in dtsim
};

// Fits the tier inside a node to files whose ranks sit on one node, then the tier between nodes
// to the others with the first fit in place. InputError for a torus base (its links are not
// these tiers) or a file with one rank.
CollectiveFit fit_collectives(const network::ClusterSpec& base, const std::vector<NcclTestsFile>& files);

}  // namespace dtsim::calibrate
