#include "sim/config/describe.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "sim/core/paths.hpp"
#include "sim/core/suggest.hpp"

namespace dtsim::config {

namespace {
// Loading is the declaration: a file the loader refuses still declared what it read first.
void read_all(const std::string& root) {
  std::vector<std::string> files;
  // docs/keys/ holds small scenarios that set the keys no shipped scenario needs.
  for (const char* folder : {"/scenarios", "/docs/keys"}) {
    std::error_code ec;
    for (const auto& e : std::filesystem::recursive_directory_iterator(root + folder, ec))
      if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) try {
      load_scenario(f);
    } catch (const std::exception&) {
    }
  for (const auto& name : list_json_stems("hardware_profiles")) try {
      load_device_profile(name);
    } catch (const std::exception&) {
    }
}

// A CNN's layers nest (block, repeat): every level is documented as the first.
std::string unnested(std::string pointer) {
  const std::string level = "/layers/*/layers/*";
  for (auto at = pointer.find(level); at != std::string::npos; at = pointer.find(level))
    pointer.replace(at, level.size(), "/layers/*");
  return pointer;
}

std::string doc_for(const KeyDeclaration& k) {
  if (!k.doc.empty()) return k.doc;  // documented where it is read (a mechanism unit's keys)
  const std::string id = doc_id(k);
  for (const auto& [key, doc] : key_docs())
    if (key == id) return doc;
  return "";
}
}  // namespace

std::string doc_id(const KeyDeclaration& k) { return k.document + " " + unnested(k.pointer); }

std::vector<KeyEntry> declared_keys() {
  KeyCatalog catalog;
  read_all(data_dir());
  std::vector<KeyEntry> out;
  for (const auto& [id, k] : catalog.keys())
    if (k.document == "scenario" || k.document == "device profile") out.push_back({k, doc_for(k)});
  return out;
}

std::string dotted(const KeyDeclaration& k) {
  std::string out = k.pointer.substr(1);
  std::replace(out.begin(), out.end(), '/', '.');
  return (k.document == "scenario" ? "" : "device:") + out;
}

std::string describe_key(const std::vector<KeyEntry>& keys, const std::string& name) {
  std::vector<std::string> names;
  for (const auto& e : keys) {
    const std::string d = dotted(e.key);
    names.push_back(d);
    if (d != name && e.key.pointer != name) continue;
    const auto& k = e.key;
    std::string out = fmt::format("{} ({} file, {})\n  {}\n  type: {}\n", d, k.document, k.pointer, e.doc, k.type);
    if (!k.unit.empty()) out += fmt::format("  written as one of: {}\n", k.unit);
    if (!k.range.empty()) out += fmt::format("  range: {}\n", k.range);
    if (!k.choices.empty()) out += fmt::format("  one of: {}\n", fmt::join(k.choices, ", "));
    out += k.required ? "  required\n" : k.fallback.empty() ? "  optional\n" : fmt::format("  default: {}\n", k.fallback);
    return out;
  }
  throw InputError("", "", fmt::format("unknown key \"{}\"{}; `dtsim describe` lists them all", name,
                                       did_you_mean(name, names)));
}

std::string keys_text(const std::vector<KeyEntry>& keys) {
  std::string out;
  for (const auto& e : keys) out += fmt::format("{:<48} {}\n", dotted(e.key), e.doc);
  return out;
}

}  // namespace dtsim::config
