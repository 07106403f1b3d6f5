#pragma once
// Running the dtsim binary from a test as a user would, without a shell.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "helpers.hpp"

extern char** environ;

namespace dtsim::test {

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Outcome {
  int code = -1;  // exit status, or -signal
  std::string out, err;
};

// dtsim with this argument vector (posix_spawn, no shell), stdout and stderr into files of `dir`,
// in the folder `cwd` when given. DTSIM_TEST_BINARY runs another build instead, to check that a
// test fails on older code.
inline Outcome run_dtsim(std::vector<std::string> args, const TempDir& dir, const std::string& cwd = "") {
  const char* other = std::getenv("DTSIM_TEST_BINARY");
  args.insert(args.begin(), other ? other : DTSIM_BINARY);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string out = dir.path("stdout.txt"), err = dir.path("stderr.txt");
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&files, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&files, cwd.c_str());
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, argv[0], &files, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&files);
  if (spawned != 0) return {-1000, "", "posix_spawn failed"};
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status), slurp(out), slurp(err)};
}

}  // namespace dtsim::test
