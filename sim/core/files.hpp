#pragma once
#include <string>
#include <utility>
#include <vector>

namespace dtsim {

std::string read_text_file(const std::string& path);  // InputError if unreadable

// InputError unless `path` may be written: missing or a regular file, in a folder that is one
// (or can be made). Symbolic links, devices, fifos and folders are never replaced. Commands call
// it before their work, so a bad output path costs nothing and writes nothing.
void check_output_path(const std::string& path);

// Output files that appear together or not at all. commit() writes each file to a fresh
// temporary beside its target (created exclusively, never through a link), syncs it, and renames
// them all only once every one is complete. On any failure, or SIGINT/SIGTERM, the temporaries
// are removed and the previous files stay as they were.
class OutputSet {
 public:
  void add(std::string path, std::string content);
  // A file of an earlier run that this set does not rewrite (a stale trace.json): removed when,
  // and only when, the set's files are put in place. Only a regular file is; anything else there
  // is left alone.
  void remove(std::string path);
  void commit();

 private:
  std::vector<std::pair<std::string, std::string>> files_;
  std::vector<std::string> stale_;
};

// A set of one file.
void write_file_atomic(const std::string& path, const std::string& content);

}  // namespace dtsim
