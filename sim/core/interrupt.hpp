#pragma once
#include <sys/types.h>

#include <string>

namespace dtsim::interrupt {

// SIGINT and SIGTERM end dtsim with 128 + the signal (130, 143) after removing the temporary
// files registered below, so an interrupted run leaves no debris; SIGXFSZ is ignored, so a file
// size limit shows as a write error rather than a crash. Called once, first thing in main.
void install();
// Installs the handlers again if install() was called: after a library replaced one of them
// (SimGrid's engine sets a SIGINT handler that exits 1).
void reclaim();

// A temporary file to remove if a signal ends the process; returns its slot for forget_file.
int watch_file(const std::string& path);
void forget_file(int slot);

// Child processes that receive the signal dtsim receives.
void watch_child(pid_t pid);
void forget_child(pid_t pid);

// While a Hold lives, a signal ends nothing: it is passed to the watched children and recorded,
// and the holder acts on it (pending(), exit_if_pending()) once its work is consistent again.
// Holds nest and may live on any thread.
class Hold {
 public:
  Hold();
  ~Hold();
  Hold(const Hold&) = delete;
  Hold& operator=(const Hold&) = delete;
};

int pending();  // the signal received while held, or 0
// Removes the watched files and exits 128 + the pending signal, if there is one and no Hold lives.
void exit_if_pending();

}  // namespace dtsim::interrupt
