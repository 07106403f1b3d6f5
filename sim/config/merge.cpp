#include "sim/config/merge.hpp"

#include <fmt/format.h>
#include <linux/magic.h>
#include <sys/statfs.h>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <set>

#include "sim/core/errors.hpp"
#include "sim/core/key_catalog.hpp"
#include "sim/core/paths.hpp"

namespace dtsim::config {

namespace fs = std::filesystem;

void deep_merge(Json& base, const Json& over) {
  if (!base.is_object() || !over.is_object()) {
    base = over;
    return;
  }
  for (const auto& [k, v] : over.items()) {
    if (v.is_null()) base.erase(k);  // as in JSON Merge Patch (RFC 7386): null removes a key
    else if (base.contains(k) && base[k].is_object() && v.is_object()) deep_merge(base[k], v);
    else base[k] = v;
  }
}

namespace {

constexpr int kMaxExtendsDepth = 16;
bool g_allow_outside = false;

bool inside(const fs::path& file, const fs::path& folder) {
  std::error_code ec;
  const fs::path f = fs::weakly_canonical(file, ec), d = fs::weakly_canonical(folder, ec);
  if (ec || d.empty()) return false;
  const auto [end, _] = std::mismatch(d.begin(), d.end(), f.begin(), f.end());
  return end == d.end();
}

// A base scenario inside the first file's folder tree or the project's scenarios/ (links
// resolved): an `extends` may not reach the rest of the file system without --allow-outside.
void check_inside(const std::string& path, const std::string& name, const std::string& base, const fs::path& root) {
  if (g_allow_outside) return;
  if (inside(base, root) || inside(base, fs::path(data_dir()) / "scenarios")) return;
  throw InputError(path, "/extends",
                   fmt::format("base scenario \"{}\" is outside this scenario's folder and the project's scenarios "
                               "folder (give --allow-outside to follow it)",
                               name));
}

// /proc and /sys files claim to be regular, yet one may block a reader forever (/proc/kmsg) or hold
// secrets: refused before they are opened.
bool kernel_file(const std::string& path) {
  struct statfs fs_info {};
  return statfs(path.c_str(), &fs_info) == 0 && (fs_info.f_type == PROC_SUPER_MAGIC || fs_info.f_type == SYSFS_MAGIC);
}

// `text`: the first file's bytes, when they come from elsewhere than `path` (a request to `serve`).
Json load_chain(const std::string& path, const std::string* text, const fs::path& root, Origins& origins,
                std::set<std::string>& active, int depth) {
  std::error_code ec;
  std::string key = fs::weakly_canonical(path, ec).string();
  if (active.contains(key)) throw InputError(path, "/extends", "extends chain loops back to this file");
  if (depth > kMaxExtendsDepth) throw InputError(path, "/extends", "extends chain is deeper than 16 files");
  Json doc = text ? parse_json_text(*text, path) : parse_json_file(path);
  if (!doc.is_object()) throw InputError(path, "", "a scenario must be a JSON object");
  Json merged = Json::object();
  KeyCatalog::note({"", "/extends", "string", "", "", {}, "", false, ""});
  if (doc.contains("extends")) {
    const Json& ext = doc["extends"];
    if (!ext.is_string() || ext.get<std::string>().empty())
      throw InputError(path, "/extends", "expected a relative path to a base scenario (a string)");
    std::string base = (fs::path(path).parent_path() / ext.get<std::string>()).string();
    check_inside(path, ext.get<std::string>(), base, root);
    if (!fs::is_regular_file(base, ec))
      throw InputError(path, "/extends", fmt::format("base scenario \"{}\" not found", ext.get<std::string>()));
    if (kernel_file(base))
      throw InputError(path, "/extends",
                       fmt::format("base scenario \"{}\" is a file of /proc or /sys, not a regular file",
                                   ext.get<std::string>()));
    active.insert(key);
    merged = load_chain(base, nullptr, root, origins, active, depth + 1);
    active.erase(key);
    doc.erase("extends");
    // A variant that names itself nothing must not take its base's name: its results would go to
    // out/<base's name>/ and overwrite the base's. Its own file's stem names it instead.
    if (depth == 0 && !doc.contains("name")) doc["name"] = fs::path(path).stem().string();
  }
  origins.record(doc, "", path);
  deep_merge(merged, doc);
  return merged;
}

}  // namespace

void allow_extends_outside(bool allow) { g_allow_outside = allow; }

std::string resolve_named_file(const Document& doc, const std::string& pointer, const std::string& value,
                               const std::string& shipped_sub) {
  const std::string here = doc.origins->file_for(pointer);
  const fs::path file = fs::path(here).parent_path() / value;
  std::error_code ec;
  if (!g_allow_outside && !inside(file, doc.root) && !inside(file, fs::path(data_dir()) / shipped_sub))
    throw InputError(here, pointer,
                     fmt::format("\"{}\" is outside this scenario's folder and the project's {} folder (give "
                                 "--allow-outside to read it)", value, shipped_sub));
  if (kernel_file(file.string()))
    throw InputError(here, pointer, fmt::format("\"{}\" is a file of /proc or /sys, not a regular file", value));
  if (!fs::is_regular_file(file, ec)) throw InputError(here, pointer, fmt::format("file \"{}\" not found", value));
  return file.string();
}

namespace {
Document load_document(const std::string& path, const std::string* text, const std::string& root) {
  Document d;
  d.origins = std::make_shared<Origins>();
  d.origins->default_file = path;
  std::set<std::string> active;
  d.root = root;
  d.json = load_chain(path, text, d.root, *d.origins, active, 0);
  // Pointers recorded for the root belong to the file the user named.
  d.origins->file_by_pointer[""] = path;
  return d;
}
}  // namespace

Document load_with_extends(const std::string& path) {
  return load_document(path, nullptr, fs::absolute(path).parent_path().string());
}

// No folder: nothing lies in the text's own folder tree, so only the project's shipped files may
// be named (as from the empty folder `serve`'s child ran in).
Document load_with_extends_text(const std::string& text, const std::string& name) {
  return load_document(name, &text, "");
}

std::string expand_preset(Document& doc, const std::string& key, const std::string& sub, const std::string& what) {
  if (KeyCatalog::listening())  // the choices list a folder: only for `dtsim describe`
    KeyCatalog::note({"", "/" + key + "/preset", "string", "", "", list_json_stems(sub), "", false, ""});
  if (!doc.json.contains(key) || !doc.json[key].is_object() || !doc.json[key].contains("preset")) return "";
  const std::string at = "/" + key;
  Json& node = doc.json[key];
  const Json& name = node["preset"];
  const std::string here = doc.origins->file_for(at + "/preset");
  static const std::regex safe("[A-Za-z0-9._-]+");
  // A user's own preset file, by a path (issue 27): same schema as the shipped ones.
  const bool path = name.is_string() && name.get<std::string>().size() <= kMaxPathChars && names_a_file(name.get<std::string>());
  // Longer names than a file name may be would reach the file system as an error naming the
  // install path; no preset's name comes near the limit.
  if (!path && (!name.is_string() || name.get<std::string>().size() > kMaxNameChars ||
                !std::regex_match(name.get<std::string>(), safe)))
    throw InputError(here, at + "/preset",
                     fmt::format("expected a preset name (letters, digits, '.', '_', '-'; at most {} characters) or a "
                                 "file's path", kMaxNameChars));
  const std::string file = path ? resolve_named_file(doc, at + "/preset", name.get<std::string>(), sub)
                                : data_dir() + "/" + sub + "/" + name.get<std::string>() + ".json";
  std::error_code ec;
  if (!fs::is_regular_file(file, ec))
    throw InputError(here, at + "/preset",
                     fmt::format("unknown {} preset \"{}\" (known: {})", what, name.get<std::string>(),
                                 fmt::join(list_json_stems(sub), ", ")));
  Json preset = parse_json_file(file);
  auto origins = std::make_shared<Origins>();
  origins->default_file = file;
  const CatalogDocument kind("preset file");
  Reader top(preset, "", origins);
  top.ignore("description");
  top.ignore("source");
  top.raw(key);
  top.finish();
  if (!preset[key].is_object()) throw InputError(file, at, "expected an object");

  Json overrides = node;
  overrides.erase("preset");
  // The preset's values come from the preset file; the user's overrides keep their own origin.
  std::map<std::string, std::string> user{{at, doc.origins->file_for(at)}};
  for (const auto& [p, f] : doc.origins->file_by_pointer)
    if (p.rfind(at + "/", 0) == 0 && p != at + "/preset") user[p] = f;
  doc.origins->record(preset[key], at, file);
  for (const auto& [p, f] : user) doc.origins->file_by_pointer[p] = f;
  Json merged = preset[key];
  deep_merge(merged, overrides);
  // A user's file is named after its stem where results name the preset.
  std::string preset_name = path ? fs::path(file).stem().string() : name.get<std::string>();
  node = merged;
  return preset_name;
}

}  // namespace dtsim::config
