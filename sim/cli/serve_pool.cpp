#include "sim/cli/serve_pool.hpp"

namespace dtsim::cli {

Pool::Pool(int workers, std::size_t queue) : limit_(queue) {
  for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { work(); });
}

Pool::~Pool() {
  {
    std::lock_guard lock(m_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (auto& t : threads_) t.join();
}

bool Pool::submit(std::function<void()> job) {
  {
    std::lock_guard lock(m_);
    // A job an idle worker is about to take does not wait.
    if (jobs_.size() >= limit_ + idle_) return false;
    jobs_.push_back(std::move(job));
  }
  ready_.notify_one();
  return true;
}

void Pool::work() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock lock(m_);
      ++idle_;
      ready_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      --idle_;
      if (jobs_.empty()) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();  // a job catches its own exceptions (run_here answers every one)
  }
}

}  // namespace dtsim::cli
