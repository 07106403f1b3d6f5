#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace dtsim {

// The longest preset or device name: below a file name's limit (255 bytes) with ".json" added.
inline constexpr std::size_t kMaxNameChars = 128;
// The longest path a scenario may give for a file it names (Linux's PATH_MAX).
inline constexpr std::size_t kMaxPathChars = 4096;

// Whether a value names a file ("./p40.json", "hw/p40.json") rather than a shipped preset.
bool names_a_file(const std::string& value);

// Root holding models/, hardware_profiles/ and scenarios/: $DTSIM_HOME, else the source tree.
std::string data_dir();
// A file name made from user text (a scenario's name): only letters, digits, '.', '_' and '-',
// no leading dot (so never "." or ".."), at most 64 characters, never empty.
std::string slug(const std::string& text);
// Names (file stems) of the *.json files directly in data_dir()/sub, sorted.
std::vector<std::string> list_json_stems(const std::string& sub);

}  // namespace dtsim
