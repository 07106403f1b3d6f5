#pragma once
#include <string>
#include <vector>

namespace dtsim {

// Root holding models/, hardware_profiles/ and scenarios/: $DTSIM_HOME, else the source tree.
std::string data_dir();
// Names (file stems) of the *.json files directly in data_dir()/sub, sorted.
std::vector<std::string> list_json_stems(const std::string& sub);

}  // namespace dtsim
