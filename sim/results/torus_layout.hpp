#pragma once
// How a torus's chips are numbered for a strategy: JAX's mesh_utils lays each mesh axis onto
// whole dimensions of the slice; dtsim numbers chips as it numbers ranks (tensor innermost), so
// the dimensions are taken in the first order whose leading ones hold the tensor (and tensor x
// context) groups whole. The links are the same in any order; only the chips' numbers change.
#include <vector>

#include "sim/config/scenario.hpp"

namespace dtsim::results {

// The torus's dimensions in that order (the scenario's own if it serves); empty where no order
// serves, or off a torus.
std::vector<int> torus_order(const config::Scenario& s);

// The scenario's cluster with its torus laid out so (unchanged where no order serves).
network::ClusterSpec laid_out_cluster(const config::Scenario& s);

}  // namespace dtsim::results
