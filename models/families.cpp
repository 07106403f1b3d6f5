// The registry of model families by `model.kind`. A family registers here with one line: the
// function in its own file (models/families/) that lists its kinds.
#include <algorithm>

#include "models/family.hpp"

namespace dtsim::models {

std::vector<FamilyKind> transformer_kinds();  // families/transformer.cpp: transformer, vit
std::vector<FamilyKind> cnn_kinds();          // families/cnn.cpp

namespace {
std::vector<FamilyKind>& registry() {
  static std::vector<FamilyKind> kinds = [] {
    std::vector<FamilyKind> out;
    for (auto listed : {transformer_kinds, cnn_kinds})
      for (auto& k : listed()) out.push_back(std::move(k));
    return out;
  }();
  return kinds;
}
}  // namespace

const std::vector<FamilyKind>& family_kinds() { return registry(); }

const FamilyKind* find_family_kind(std::string_view name) {
  for (const auto& k : registry())
    if (k.name == name) return &k;
  return nullptr;
}

ScopedFamilyKind::ScopedFamilyKind(FamilyKind kind) : name_(kind.name) { registry().push_back(std::move(kind)); }

ScopedFamilyKind::~ScopedFamilyKind() {
  auto& kinds = registry();
  kinds.erase(std::remove_if(kinds.begin(), kinds.end(), [&](const FamilyKind& k) { return k.name == name_; }), kinds.end());
}

}  // namespace dtsim::models
