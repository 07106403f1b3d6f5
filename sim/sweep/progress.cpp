#include "sim/sweep/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <iostream>

namespace dtsim::sweep {

Progress::Progress(bool on, std::size_t total) : on_(on), tty_(::isatty(2)), total_(total) {}

void Progress::done_one() {
  if (!on_) return;
  const std::lock_guard<std::mutex> lock(mu_);
  ++done_;
  const double t = elapsed();
  if (done_ < total_ && t - last_ < (tty_ ? 0.2 : 1.0)) return;
  last_ = t;
  const double eta = done_ ? t / static_cast<double>(done_) * static_cast<double>(total_ - done_) : 0;
  std::cerr << fmt::format("{}sweep: {}/{} candidates, {:.1f} s elapsed, ETA {:.1f} s{}", tty_ ? "\r" : "", done_,
                           total_, t, eta, tty_ ? "" : "\n");
  if (tty_ && done_ == total_) std::cerr << "\n";
  std::cerr.flush();
}

double Progress::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

}  // namespace dtsim::sweep
