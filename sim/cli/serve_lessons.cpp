// The explorer's lessons (reports/lessons/*.json): read once, every key checked, so that a typo in
// a lesson is an error naming its file and pointer when the server starts, not a dead control.
#include "sim/cli/serve_lessons.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "sim/cli/serve_api.hpp"
#include "sim/core/errors.hpp"
#include "sim/core/json_reader.hpp"
#include "sim/core/paths.hpp"
#include "sim/core/suggest.hpp"

namespace dtsim::cli::lessons {

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// Control ids and option values travel in the page's address and element ids.
bool plain_id(const std::string& s) {
  return !s.empty() && s.size() <= 40 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; });
}

// An option's value as the page's <select> and address carry it.
std::string shown(const Json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

void check_figure(Reader r) {
  const std::string at = r.text("at");
  if (at.empty() || at[0] != '/') r.fail("at", "a JSON pointer into the result, e.g. \"/step_time_s\"");
  r.text("label");
  r.choice("unit", {"s", "bytes", "fraction", "per_s"});
  r.choice("better", {"lower", "higher"});
  r.finish();
}

// One option: a plain value, or {"value", "label", "patch"}. Returns its value.
Json check_option(const Json& o, const std::string& pointer, const std::shared_ptr<Origins>& origins, bool has_at) {
  if (!o.is_object()) {
    if (!has_at) throw InputError(origins->default_file, pointer, "an option without \"patch\" needs the control's \"at\"");
    return o;
  }
  Reader r(o, pointer, origins);
  const Json value = r.raw("value");
  if (r.has("label")) r.text("label");
  if (r.has("patch") && !r.raw("patch").is_object()) r.fail("patch", "a JSON merge patch (an object) onto the scenario");
  if (!r.has("patch") && !has_at) r.fail_here("an option without \"patch\" needs the control's \"at\"");
  r.finish();
  return value;
}

// The controls; returns each id's option values as shown.
std::map<std::string, std::set<std::string>> check_controls(Reader& lesson, const std::shared_ptr<Origins>& origins) {
  std::map<std::string, std::set<std::string>> ids;
  const Json& controls = lesson.raw("controls");
  if (!controls.is_array() || controls.empty()) lesson.fail("controls", "a non-empty array of controls");
  for (std::size_t i = 0; i < controls.size(); ++i) {
    Reader c(controls[i], lesson.pointer("controls") + "/" + std::to_string(i), origins);
    const std::string id = c.text("id");
    if (!plain_id(id)) c.fail("id", "lower-case letters, digits and '-' only, at most 40");
    if (ids.contains(id)) c.fail("id", "\"" + id + "\" names two controls");
    c.text("label");
    const bool has_at = c.has("at");
    if (has_at && c.text("at").rfind('/', 0) != 0) c.fail("at", "a JSON pointer into the scenario, e.g. \"/parallelism/tensor\"");
    const Json& options = c.raw("options");
    if (!options.is_array() || options.size() < 2) c.fail("options", "an array of at least two choices");
    auto& values = ids[id];
    for (std::size_t k = 0; k < options.size(); ++k) {
      const std::string at = c.pointer("options") + "/" + std::to_string(k);
      const std::string v = shown(check_option(options[k], at, origins, has_at));
      if (!values.insert(v).second) throw InputError(origins->default_file, at, "the value \"" + v + "\" is there twice");
    }
    c.finish();
  }
  return ids;
}

// A side's values: one for every control, each among its options.
void check_side(Reader r, const std::map<std::string, std::set<std::string>>& ids) {
  r.text("label");
  Reader values = r.object("values");
  for (const auto& [id, options] : ids) {
    if (!values.has(id)) values.fail_here("no value for the control \"" + id + "\"");
    const std::string v = shown(values.raw(id));
    if (!options.contains(v)) values.fail(id, "\"" + v + "\" is not one of its options" + did_you_mean(v, {options.begin(), options.end()}));
  }
  values.finish();
  r.finish();
}

void check_expect(Reader r) {
  if (r.has("same_within")) {
    r.number("same_within", {0, 1, true});
  } else {
    r.choice("better", {"A", "B"});
    r.number("by_at_least", {1, 1000});
  }
  r.finish();
}

void check_tries(Reader& lesson, const std::map<std::string, std::set<std::string>>& ids, const std::shared_ptr<Origins>& origins) {
  const Json& tries = lesson.raw("tries");
  if (!tries.is_array() || tries.empty()) lesson.fail("tries", "a non-empty array of things to try");
  for (std::size_t i = 0; i < tries.size(); ++i) {
    Reader t(tries[i], lesson.pointer("tries") + "/" + std::to_string(i), origins);
    t.choice("side", {"A", "B", "both"});
    const std::string id = t.text("control");
    if (!ids.contains(id)) t.fail("control", "no control \"" + id + "\"");
    const std::string v = shown(t.raw("value"));
    if (!ids.at(id).contains(v)) t.fail("value", "\"" + v + "\" is not one of the control's options");
    const bool moves = t.has("moves"), then = t.has("then_better");
    if (moves == then) t.fail_here("give \"moves\" (up, down, same) or \"then_better\" (A, B), one of them");
    if (moves) t.choice("moves", {"up", "down", "same"});
    if (then) t.choice("then_better", {"A", "B"});
    t.text("says");
    t.finish();
  }
}

}  // namespace

Json check(Json lesson, const std::string& name, const std::string& file) {
  if (!plain_id(name)) throw InputError(file, "", "a lesson's file name is lower-case letters, digits and '-', at most 40, then .json");
  auto origins = std::make_shared<Origins>();
  origins->default_file = file;
  Reader r(lesson, "", origins);
  r.integer("order", 0, 1000);
  for (const char* key : {"title", "lecture", "text", "question"}) r.text(key);
  check_figure(r.object("figure"));
  if (!r.raw("base").is_object()) r.fail("base", "a scenario (an object), which may extend a shipped one by name");
  const Json& base = r.raw("base");
  if (base.contains("extends") && (!base["extends"].is_string() || api::shipped_scenario(base["extends"]).empty()))
    throw InputError(file, "/base/extends", "not one of the project's scenarios as `dtsim list scenarios` shows them");
  const auto ids = check_controls(r, origins);
  check_side(r.object("A"), ids);
  check_side(r.object("B"), ids);
  check_expect(r.object("expect"));
  check_tries(r, ids, origins);
  r.finish();
  lesson["name"] = name;
  return lesson;
}

Json side_scenario(const Json& lesson, const std::string& side, const Json& values) {
  Json s = lesson["base"];
  for (const auto& c : lesson["controls"]) {
    const std::string id = c["id"];
    const Json& v = values.contains(id) ? values[id] : lesson[side]["values"][id];
    for (const auto& o : c["options"]) {
      const Json& ov = o.is_object() ? o["value"] : o;
      if (shown(ov) != shown(v)) continue;
      if (c.contains("at")) s[Json::json_pointer(c["at"].get<std::string>())] = ov;
      if (o.is_object() && o.contains("patch")) s.merge_patch(o["patch"]);
    }
  }
  return s;
}

const std::string& all() {
  static const std::string text = [] {
    std::vector<Json> found;
    std::error_code ec;
    const fs::path dir = fs::path(data_dir()) / "reports" / "lessons";
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (e.is_symlink(ec) || !e.is_regular_file(ec) || e.path().extension() != ".json") continue;
      const std::string file = e.path().string();
      found.push_back(check(parse_json_file(file), e.path().stem().string(), file));
    }
    std::sort(found.begin(), found.end(), [](const Json& a, const Json& b) { return a["order"] < b["order"]; });
    return Json(found).dump();
  }();
  return text;
}

}  // namespace dtsim::cli::lessons
