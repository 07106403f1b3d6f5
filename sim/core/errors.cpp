#include "sim/core/errors.hpp"

#include <filesystem>

namespace dtsim {

namespace {
std::string format_location(const std::string& file, const std::string& pointer, const std::string& reason) {
  // The path as the user (or the naming file's "extends") wrote it, tidied of "dir/../": two
  // files of one name in different folders (a scenario and its base) must not read alike.
  std::string where = file.empty() ? "" : std::filesystem::path(file).lexically_normal().string();
  if (!pointer.empty()) where += (where.empty() ? "" : ":") + pointer;
  return where.empty() ? reason : where + ": " + reason;
}
}  // namespace

InputError::InputError(std::string file, std::string pointer, const std::string& reason)
    : std::runtime_error(format_location(file, pointer, reason)),
      file_(std::move(file)),
      pointer_(std::move(pointer)),
      reason_(reason) {}

}  // namespace dtsim
