#include "sim/config/model_config.hpp"

namespace dtsim::config {

models::ModelSpec parse_model(Reader r, const std::string& preset, const std::shared_ptr<const Origins>& origins) {
  const std::string name = preset.empty() ? "inline" : preset;
  std::vector<std::string> kinds;
  for (const auto& k : models::family_kinds()) kinds.push_back(k.name);
  const std::string kind = r.choice("kind", kinds);
  return models::ModelSpec(name, models::find_family_kind(kind)->parse(r, name, origins));
}

}  // namespace dtsim::config
