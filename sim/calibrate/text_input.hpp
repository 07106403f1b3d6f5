#pragma once
// What `dtsim calibrate` reads from text files a user brings (nccl-tests logs, CSVs, step logs):
// their lines, numbers and CSV columns, with errors that name the file and the line (exit 2).
#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace dtsim::calibrate {

// A measurement file may have this many bytes; larger ones are refused before they are read.
inline constexpr std::size_t kMaxTextBytes = std::size_t{64} << 20;

struct Line {
  int number = 0;  // 1-based, as editors count
  std::string text;
};

// The file's lines (without "\r\n" or "\n"). InputError when it is missing, too large or binary.
std::vector<Line> read_lines(const std::string& path);

// Whitespace-separated fields.
std::vector<std::string> fields(const std::string& text);

// A finite number written as the whole of `text`, else InputError at file:line naming `what`.
double number_at(const std::string& file, int line, const std::string& text, const std::string& what);

// A CSV table: the first line that is not blank or a "#" comment names the columns; every later
// such line is a row with as many cells. Cells are trimmed; quotes are not part of the format.
struct CsvTable {
  std::string file;
  std::vector<std::string> columns;
  int header_line = 0;
  std::vector<Line> rows;                    // the row lines, for their numbers
  std::vector<std::vector<std::string>> cells;
  // The column's index; InputError naming the columns it knows (and the nearest) when absent.
  std::size_t column(const std::string& name) const;
  bool has(const std::string& name) const;
  // Every column must be one of `known`: a misspelt optional column is an error, not ignored.
  void only(const std::vector<std::string>& known) const;
};
CsvTable read_csv(const std::string& path);

// `value` of up to 6 significant digits, as the profiles and reports write numbers: the same
// fit prints the same bytes on every machine whatever noise sits in its last bits.
double rounded(double value, int digits = 6);

}  // namespace dtsim::calibrate
