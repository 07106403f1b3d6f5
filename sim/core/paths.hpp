#pragma once
#include <string>
#include <vector>

namespace dtsim {

// Root holding models/, hardware_profiles/ and scenarios/: $DTSIM_HOME, else the source tree.
std::string data_dir();
// A file name made from user text (a scenario's name): only letters, digits, '.', '_' and '-',
// no leading dot (so never "." or ".."), at most 64 characters, never empty.
std::string slug(const std::string& text);
// Names (file stems) of the *.json files directly in data_dir()/sub, sorted.
std::vector<std::string> list_json_stems(const std::string& sub);

}  // namespace dtsim
