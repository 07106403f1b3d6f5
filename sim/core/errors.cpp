#include "sim/core/errors.hpp"

#include <filesystem>

namespace dtsim {

namespace {
std::string format_location(const std::string& file, const std::string& pointer, const std::string& reason) {
  std::string where = std::filesystem::path(file).filename().string();
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
