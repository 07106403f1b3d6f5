#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace dtsim {

// The longest preset or device name: below a file name's limit (255 bytes) with ".json" added.
inline constexpr std::size_t kMaxNameChars = 128;

// Root holding models/, hardware_profiles/ and scenarios/: $DTSIM_HOME, else the source tree.
std::string data_dir();
// A file name made from user text (a scenario's name): only letters, digits, '.', '_' and '-',
// no leading dot (so never "." or ".."), at most 64 characters, never empty.
std::string slug(const std::string& text);
// Names (file stems) of the *.json files directly in data_dir()/sub, sorted.
std::vector<std::string> list_json_stems(const std::string& sub);

}  // namespace dtsim
