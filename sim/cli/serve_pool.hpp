#pragma once
// The threads of `dtsim serve` that answer requests in process, and the bounded queue before them.
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace dtsim::cli {

class Pool {
 public:
  // `workers` threads; at most `queue` jobs wait for one, so a burst costs bounded memory.
  Pool(int workers, std::size_t queue);
  ~Pool();  // runs what is queued, then joins
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // Queues `job`; false, and nothing queued, when every worker is busy and `queue` jobs already wait.
  bool submit(std::function<void()> job);
  std::size_t queue() const { return limit_; }
  int workers() const { return static_cast<int>(threads_.size()); }

 private:
  void work();

  std::mutex m_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> jobs_;
  std::size_t limit_, idle_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace dtsim::cli
