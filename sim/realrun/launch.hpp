#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

// The realrun command's child processes: the dtsim binary itself (never a shell) with an argument
// vector, a listening socket handed down as file descriptor 3 and stdout into a pipe; supervised
// to a deadline, and killed and reaped on timeout, failure or a signal.
namespace dtsim::realrun {

// A socket listening on 127.0.0.1 on a port the kernel picks (close-on-exec); its port.
int listen_fd(int& port);

struct Child {
  pid_t pid = -1;
  int out = -1;  // read end of its stdout
  std::string output;
  bool exited = false;
  int status = 0;
};

// Starts /proc/self/exe with `args` (after argv[0]); `inherit` becomes its fd 3; OMP_NUM_THREADS
// set to `threads`.
Child spawn_self(const std::vector<std::string>& args, int inherit, int threads);

// Waits for every child to exit, collecting their output, until `deadline_s` (steady clock,
// seconds). Returns "" when all exited 0, else why not, having killed (SIGKILL) and reaped the
// rest. A SIGINT or SIGTERM to dtsim meanwhile does the same and then ends dtsim (130, 143).
std::string supervise(std::vector<Child>& children, double deadline_s);

double steady_now();

}  // namespace dtsim::realrun
