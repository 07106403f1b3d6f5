#include "sim/core/key_catalog.hpp"

#include <cctype>

namespace dtsim {

namespace {
thread_local KeyCatalog* active_catalog = nullptr;
thread_local std::string document = "scenario";

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}
// The same key read again (another file, another code path): one declaration says what all say.
// A default or bound the loader computes from other keys differs between files: say so.
void merge(KeyDeclaration& into, const KeyDeclaration& d) {
  constexpr const char* depends = "depends on other keys";
  // A key read with a default on one path is optional, even if another path requires it.
  into.required = into.required && d.required;
  if (into.type == "any" && d.type != "any") into.type = d.type;
  if (into.unit.empty()) into.unit = d.unit;
  if (into.choices.empty()) into.choices = d.choices;
  if (into.range.empty()) into.range = d.range;
  else if (!d.range.empty() && d.range != into.range) into.range = depends;
  if (into.doc.empty()) into.doc = d.doc;
  if (into.fallback.empty()) into.fallback = d.fallback;
  else if (!d.fallback.empty() && d.fallback != into.fallback) into.fallback = depends;
}
}  // namespace

KeyCatalog::KeyCatalog() : previous_(active_catalog) { active_catalog = this; }
KeyCatalog::~KeyCatalog() { active_catalog = previous_; }

bool KeyCatalog::listening() { return active_catalog != nullptr; }

void KeyCatalog::note(KeyDeclaration d) {
  if (!active_catalog) return;
  d.document = document;
  d.pointer = pointer_pattern(d.pointer);
  const std::string id = d.document + " " + d.pointer;
  auto [it, added] = active_catalog->keys_.emplace(id, d);
  if (!added) merge(it->second, d);
}

void KeyCatalog::note_doc(const std::string& pointer, std::string doc) {
  if (!active_catalog) return;
  auto it = active_catalog->keys_.find(document + " " + pointer_pattern(pointer));
  if (it != active_catalog->keys_.end()) it->second.doc = std::move(doc);
}

CatalogDocument::CatalogDocument(std::string name) : previous_(document) { document = std::move(name); }
CatalogDocument::~CatalogDocument() { document = previous_; }

std::string pointer_pattern(const std::string& pointer) {
  std::string out;
  std::size_t at = 0;
  while (at < pointer.size()) {
    std::size_t next = pointer.find('/', at + 1);
    if (next == std::string::npos) next = pointer.size();
    const std::string part = pointer.substr(at + 1, next - at - 1);
    out += "/" + (all_digits(part) ? std::string("*") : part);
    at = next;
  }
  return out;
}

}  // namespace dtsim
