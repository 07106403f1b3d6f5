#include "sim/core/files.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>

#include "sim/core/errors.hpp"
#include "sim/core/interrupt.hpp"

namespace dtsim {

namespace fs = std::filesystem;

std::string read_text_file(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw InputError(path, "", "no such file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "", "cannot open file for reading");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

namespace {

const char* kind_of(mode_t mode) {
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a fifo";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

std::runtime_error io_error(const std::string& what, const std::string& path, int err) {
  return std::runtime_error(what + " " + path + ": " + std::strerror(err));
}

fs::path folder_of(const std::string& path) {
  const fs::path p(path);
  return p.has_parent_path() ? p.parent_path() : fs::path(".");
}

// Creates the missing folders above `path`; returns those it made, deepest last.
std::vector<fs::path> make_folders(const fs::path& folder) {
  std::vector<fs::path> missing;
  for (fs::path f = folder; !f.empty() && !fs::exists(f); f = f.parent_path()) {
    missing.insert(missing.begin(), f);
    if (f == f.parent_path()) break;
  }
  std::vector<fs::path> made;
  for (const auto& f : missing) {
    if (::mkdir(f.c_str(), 0777) == 0) {
      made.push_back(f);
    } else if (errno != EEXIST) {
      const int err = errno;
      for (auto it = made.rbegin(); it != made.rend(); ++it) ::rmdir(it->c_str());
      throw io_error("cannot create the folder", f.string(), err);
    }
  }
  return made;
}

// Temporaries are named ".TARGET.PID.RANDOM.tmp": a process killed by SIGKILL cannot remove its
// own, so the next write to the folder removes those of processes that are gone.
std::optional<pid_t> temporary_owner(const std::string& name) {
  static const std::regex pattern(R"(\..+\.([0-9]{1,9})\.[0-9a-f]{16}\.tmp)");
  std::smatch m;
  if (!std::regex_match(name, m, pattern)) return std::nullopt;
  return static_cast<pid_t>(std::stol(m[1].str()));
}

void remove_stale_temporaries(const fs::path& folder) {
  std::error_code ec;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const auto pid = temporary_owner(name);
    if (!pid || *pid <= 0 || *pid == ::getpid()) continue;
    if (::kill(*pid, 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to judge
    struct stat st {};
    // Only regular files of this user: never a link, and never another user's debris.
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) continue;
    ::unlink(it->path().c_str());
  }
}

// Opens a new file with a random name beside `target`: O_EXCL and O_NOFOLLOW, so a file or link
// planted under a predictable name is never written through.
int open_temporary(const std::string& target, std::string& tmp, int& slot) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  const fs::path t(target);
  for (int attempt = 0; attempt < 100; ++attempt) {
    tmp = (folder_of(target) / fmt::format(".{}.{}.{:016x}.tmp", t.filename().string(), ::getpid(), rng())).string();
    slot = interrupt::watch_file(tmp);  // before it exists, so a signal never misses it
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd >= 0) return fd;
    const int err = errno;
    interrupt::forget_file(slot);
    slot = -1;
    if (err != EEXIST) throw io_error("cannot create a temporary file for", target, err);
  }
  throw std::runtime_error("cannot create a temporary file for " + target + ": every name tried exists");
}

void write_all(int fd, const std::string& content, const std::string& target) {
  const char* p = content.data();
  std::size_t left = content.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw io_error("cannot write", target, n < 0 ? errno : ENOSPC);
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 && errno != EINVAL) throw io_error("cannot write", target, errno);
}

struct Temporary {
  std::string path;
  int slot = -1;
};

}  // namespace

void check_output_path(const std::string& path) {
  if (path.empty()) throw InputError("", "", "an empty output path");
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw InputError("", "", path + ": " + kind_of(st.st_mode) + ", not a regular file; dtsim replaces only regular files");
  // The nearest existing folder above it must be a folder (a link to one is fine).
  for (fs::path f = folder_of(path);; f = f.parent_path()) {
    if (::stat(f.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode))
        throw InputError("", "", path + ": " + f.string() + " is " + kind_of(st.st_mode) + ", not a folder");
      break;
    }
    if (f.empty() || f == f.parent_path()) break;
  }
}

void OutputSet::add(std::string path, std::string content) { files_.emplace_back(std::move(path), std::move(content)); }

void OutputSet::remove(std::string path) { stale_.push_back(std::move(path)); }

void OutputSet::commit() {
  for (const auto& [path, content] : files_) check_output_path(path);
  std::vector<fs::path> made;
  for (const auto& [path, content] : files_)
    for (auto& f : make_folders(folder_of(path))) made.push_back(f);
  std::vector<Temporary> temps;
  std::set<fs::path> folders;
  for (const auto& [path, content] : files_) folders.insert(folder_of(path));
  for (const auto& f : folders) remove_stale_temporaries(f);
  try {
    for (const auto& [path, content] : files_) {
      Temporary t;
      const int fd = open_temporary(path, t.path, t.slot);
      temps.push_back(t);
      try {
        write_all(fd, content, path);
      } catch (...) {
        ::close(fd);
        throw;
      }
      if (::close(fd) != 0) throw io_error("cannot write", path, errno);
    }
    // Every file is complete: put them in place together. A signal now waits until all are.
    interrupt::Hold hold;
    for (const auto& [path, content] : files_) check_output_path(path);  // nothing swapped in meanwhile
    // rename() within one folder fails only if the target changed under us, just checked; were it
    // to fail half way, the files already renamed would stay and the error says which did not.
    for (std::size_t i = 0; i < files_.size(); ++i) {
      if (::rename(temps[i].path.c_str(), files_[i].first.c_str()) != 0)
        throw io_error("cannot replace", files_[i].first, errno);
      interrupt::forget_file(temps[i].slot);
      temps[i].slot = -1;
      temps[i].path.clear();
    }
    // Then the earlier run's files this one does not rewrite: the folder now holds one run's set.
    for (const auto& path : stale_) {
      struct stat st {};
      if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      if (::unlink(path.c_str()) != 0 && errno != ENOENT) throw io_error("cannot remove the stale", path, errno);
    }
  } catch (...) {
    for (auto& t : temps)
      if (!t.path.empty()) {
        ::unlink(t.path.c_str());
        interrupt::forget_file(t.slot);
      }
    for (auto it = made.rbegin(); it != made.rend(); ++it) ::rmdir(it->c_str());  // only if still empty
    interrupt::exit_if_pending();
    throw;
  }
  // The names are durable once their folders are synced; a failure here loses nothing written.
  std::vector<std::string> touched;
  for (const auto& [path, content] : files_) touched.push_back(path);
  touched.insert(touched.end(), stale_.begin(), stale_.end());
  for (const auto& path : touched)
    if (const int dir = ::open(folder_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dir >= 0) {
      ::fsync(dir);
      ::close(dir);
    }
  interrupt::exit_if_pending();
}

void write_file_atomic(const std::string& path, const std::string& content) {
  OutputSet set;
  set.add(path, content);
  set.commit();
}

}  // namespace dtsim
