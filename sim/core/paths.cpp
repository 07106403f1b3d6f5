#include "sim/core/paths.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

namespace dtsim {

bool names_a_file(const std::string& value) {
  return value.find('/') != std::string::npos || (value.size() > 5 && value.ends_with(".json"));
}

std::string data_dir() {
  if (const char* home = std::getenv("DTSIM_HOME"); home && *home) return home;
  return DTSIM_SOURCE_DIR;
}

std::string slug(const std::string& text) {
  std::string out;
  for (const char c : text.substr(0, 64)) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
                       (c == '.' && !out.empty());
    out += plain ? c : '_';
  }
  return out.empty() ? "_" : out;
}

std::vector<std::string> list_json_stems(const std::string& sub) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(data_dir() + "/" + sub, ec))
    if (e.is_regular_file() && e.path().extension() == ".json") out.push_back(e.path().stem().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace dtsim
