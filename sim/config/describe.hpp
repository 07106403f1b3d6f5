#pragma once
// `dtsim describe`: every key an input file may hold, from the loader's own reads (KeyCatalog),
// with one line of documentation each (key_docs.cpp). docs/keys.md and docs/scenario.schema.json
// are this module's output, and a test keeps them equal to it.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/core/key_catalog.hpp"

namespace dtsim::config {

struct KeyEntry {
  KeyDeclaration key;
  std::string doc;  // one line; "" when key_docs.cpp has none (a test refuses that)
};

// Reads every shipped scenario and device profile with a catalog listening.
std::vector<KeyEntry> declared_keys();

// "scenario /model/layers/*/op": the key_docs() entry of a key (a CNN's nested layers share the
// top level's).
std::string doc_id(const KeyDeclaration& k);

// "parallelism.tensor" for the scenario's /parallelism/tensor; arrays' items as "*".
std::string dotted(const KeyDeclaration& k);

// One key as text (name, type, unit, default, range, doc). An unknown name is an InputError
// with the nearest known one.
std::string describe_key(const std::vector<KeyEntry>& keys, const std::string& name);
// Every key: a plain list (text) or the reference page (markdown).
std::string keys_text(const std::vector<KeyEntry>& keys);
std::string keys_markdown(const std::vector<KeyEntry>& keys);
// A JSON Schema (draft 2020-12) for a scenario file as written: every key optional (a file may
// take the rest from what it extends), no key beyond the declared ones.
nlohmann::ordered_json scenario_schema(const std::vector<KeyEntry>& keys);

// The documentation table: "document pointer" -> one line.
const std::vector<std::pair<std::string, std::string>>& key_docs();

}  // namespace dtsim::config
