#include "sim/network/algorithm_registry.hpp"

#include <stdexcept>

namespace dtsim::network {

namespace algorithms {
// Each defined beside its lowering, in sim/network/algorithms/.
AlgorithmUnit ring_unit();
AlgorithmUnit tree_unit();
AlgorithmUnit halving_doubling_unit();
AlgorithmUnit hierarchical_unit();
AlgorithmUnit direct_unit();
AlgorithmUnit master_worker_unit();
AlgorithmUnit round_robin_unit();
AlgorithmUnit parameter_server_unit();
AlgorithmUnit central_storage_unit();
AlgorithmUnit naive_unit();
AlgorithmUnit auto_unit();
}  // namespace algorithms

const std::vector<AlgorithmUnit>& algorithm_units() {
  namespace al = algorithms;
  // One line per algorithm. Its place is its taskgraph::Algorithm value: a new one goes last.
  static const std::vector<AlgorithmUnit> units{
      al::ring_unit(),
      al::tree_unit(),
      al::halving_doubling_unit(),
      al::hierarchical_unit(),
      al::direct_unit(),
      al::master_worker_unit(),
      al::round_robin_unit(),
      al::parameter_server_unit(),
      al::central_storage_unit(),
      al::naive_unit(),
      al::auto_unit(),
  };
  return units;
}

const AlgorithmUnit& unit_of(taskgraph::Algorithm a) {
  const auto& units = algorithm_units();
  const auto i = static_cast<std::size_t>(a);
  if (i >= units.size()) throw std::logic_error("collective algorithm " + std::to_string(i) + " is not registered");
  return units[i];
}

const char* algorithm_name(taskgraph::Algorithm a) { return unit_of(a).name; }

std::optional<taskgraph::Algorithm> algorithm_named(const std::string& name) {
  const auto& units = algorithm_units();
  for (std::size_t i = 0; i < units.size(); ++i)
    if (name == units[i].name) return static_cast<taskgraph::Algorithm>(i);
  return std::nullopt;
}

std::vector<std::string> algorithm_names() {
  std::vector<std::string> out;
  for (const auto& u : algorithm_units()) out.emplace_back(u.name);
  return out;
}

}  // namespace dtsim::network
