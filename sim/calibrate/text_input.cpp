#include "sim/calibrate/text_input.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>

#include "sim/core/errors.hpp"
#include "sim/core/files.hpp"
#include "sim/core/suggest.hpp"

namespace dtsim::calibrate {

namespace {
std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t at; (at = s.find(',', start)) != std::string::npos; start = at + 1) out.push_back(trim(s.substr(start, at - start)));
  out.push_back(trim(s.substr(start)));
  return out;
}

bool skipped(const std::string& text) {
  const std::string t = trim(text);
  return t.empty() || t.front() == '#';
}
}  // namespace

std::vector<Line> read_lines(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw InputError(path, "", "no such file");
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > kMaxTextBytes)
    throw InputError(path, "", fmt::format("{} bytes is larger than the {} MiB a measurement file may have", size, kMaxTextBytes >> 20));
  const std::string text = read_text_file(path);
  if (text.find('\0') != std::string::npos) throw InputError(path, "", "a binary file, not text");
  std::vector<Line> lines;
  std::size_t start = 0;
  for (int n = 1; start < text.size(); ++n) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string l = text.substr(start, end - start);
    if (!l.empty() && l.back() == '\r') l.pop_back();
    lines.push_back({n, std::move(l)});
    start = end + 1;
  }
  return lines;
}

std::vector<std::string> fields(const std::string& text) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    const std::size_t b = i;
    while (i < text.size() && !std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (i > b) out.push_back(text.substr(b, i - b));
  }
  return out;
}

double number_at(const std::string& file, int line, const std::string& text, const std::string& what) {
  double v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(v))
    throw InputError(file, std::to_string(line), fmt::format("{}: \"{}\" is not a number", what, text.substr(0, 40)));
  return v;
}

std::size_t CsvTable::column(const std::string& name) const {
  const auto it = std::find(columns.begin(), columns.end(), name);
  if (it == columns.end())
    throw InputError(file, "", fmt::format("no column \"{}\" (columns: {}){}", name, fmt::join(columns, ", "), did_you_mean(name, columns)));
  return static_cast<std::size_t>(it - columns.begin());
}

bool CsvTable::has(const std::string& name) const { return std::find(columns.begin(), columns.end(), name) != columns.end(); }

void CsvTable::only(const std::vector<std::string>& known) const {
  for (const auto& c : columns)
    if (std::find(known.begin(), known.end(), c) == known.end())
      throw InputError(file, std::to_string(header_line),
                       fmt::format("unknown column \"{}\"{} (known: {})", c, did_you_mean(c, known), fmt::join(known, ", ")));
}

CsvTable read_csv(const std::string& path) {
  CsvTable t;
  t.file = path;
  for (const auto& l : read_lines(path)) {
    if (skipped(l.text)) continue;
    auto cells = split_commas(l.text);
    if (t.columns.empty()) {
      t.columns = std::move(cells);
      t.header_line = l.number;
      continue;
    }
    if (cells.size() != t.columns.size())
      throw InputError(path, std::to_string(l.number),
                       fmt::format("{} cells, the header names {} columns ({})", cells.size(), t.columns.size(), fmt::join(t.columns, ",")));
    t.rows.push_back(l);
    t.cells.push_back(std::move(cells));
  }
  if (t.columns.empty()) throw InputError(path, "", "empty: expected a header line naming the columns, then rows");
  if (t.rows.empty()) throw InputError(path, "", "no rows below the header");
  return t;
}

double rounded(double value, int digits) {
  if (value == 0 || !std::isfinite(value)) return value;
  return std::stod(fmt::format("{:.{}g}", value, digits));
}

}  // namespace dtsim::calibrate
