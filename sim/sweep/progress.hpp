#pragma once
// The sweep's progress and ETA on stderr, at most a few times a second; on a terminal one line
// rewritten. Safe to call from the sweep's worker threads.
#include <chrono>
#include <cstddef>
#include <mutex>

namespace dtsim::sweep {

class Progress {
 public:
  Progress(bool on, std::size_t total);
  void done_one();

 private:
  double elapsed() const;
  bool on_, tty_;
  std::size_t total_, done_ = 0;
  double last_ = -1;
  std::mutex mu_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace dtsim::sweep
