#pragma once
// The explorer's lessons: one JSON file each under reports/lessons/ (the file's stem is the
// lesson's name), each a pair of set-ups A and B built from one base scenario and a few controls.
// docs/explorer.md describes the format.
#include <nlohmann/json.hpp>
#include <string>

namespace dtsim::cli::lessons {

// Every lesson of data_dir()/reports/lessons/, checked and sorted by "order", each with its
// "name" added: the JSON array GET /api/lessons answers. Read once, regular files only; a bad
// file throws InputError naming the file and the JSON pointer.
const std::string& all();

// One lesson checked (what all() does to each file, `file` naming it in errors); returns it with
// "name" added.
nlohmann::json check(nlohmann::json lesson, const std::string& name, const std::string& file);

// The scenario of one side ("A" or "B") of a checked lesson, as the page builds it: the base, then
// each control's value (written at its "at" pointer, or its option's "patch" merged, RFC 7386).
// `values` overrides the side's own values by control id.
nlohmann::json side_scenario(const nlohmann::json& lesson, const std::string& side,
                             const nlohmann::json& values = nlohmann::json::object());

}  // namespace dtsim::cli::lessons
