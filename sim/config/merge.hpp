#pragma once
#include <memory>
#include <string>

#include "sim/core/json_reader.hpp"
#include "sim/core/paths.hpp"

namespace dtsim::config {

struct Document {
  Json json;
  std::shared_ptr<Origins> origins;
  std::string root;  // the folder of the file the user named: its tree is where named files may lie
};

// Loads a scenario file, following `extends` (resolved relative to the file naming it) and
// deep-merging each file over its base: objects merge key by key, null removes a key (as in
// JSON Merge Patch), anything else replaces. A file that extends another and sets no "name" is
// named after its own file's stem ("variant.json": "variant"), never its base's.
// A base must lie in the first file's folder tree or in the project's scenarios/ (links resolved),
// unless allow_extends_outside(true) (the command line's --allow-outside) was called.
Document load_with_extends(const std::string& path);
void allow_extends_outside(bool allow);
// The same for a scenario given as text (a request to `dtsim serve`), read as the file `name` of
// a folder that holds nothing else: errors name `name`; its "extends" and named files must be the
// project's own (absolute paths into scenarios/ and the presets' folders).
Document load_with_extends_text(const std::string& text, const std::string& name);

// Replaces {"preset": NAME, ...overrides} at `pointer` with data_dir()/sub/NAME.json's `field`
// object, the overrides merged on top; returns NAME, or "" when the object is inline. Values keep the file they came from, for errors.
std::string expand_preset(Document& doc, const std::string& key, const std::string& sub, const std::string& what);

void deep_merge(Json& base, const Json& over);

// The file `value` names, relative to the file that set `pointer`. Like an `extends`, it must lie
// in the scenario's folder tree or data_dir()/shipped_sub unless --allow-outside, exist, and not be
// a /proc or /sys file; otherwise an InputError at `pointer` in the file that set it.
std::string resolve_named_file(const Document& doc, const std::string& pointer, const std::string& value,
                               const std::string& shipped_sub);

}  // namespace dtsim::config
