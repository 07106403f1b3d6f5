#pragma once
#include <string>

namespace dtsim {

std::string read_text_file(const std::string& path);  // InputError if unreadable
// Writes to a temporary file beside `path` and renames it, so a crash never leaves half a file.
void write_file_atomic(const std::string& path, const std::string& content);

}  // namespace dtsim
