#include "sim/core/interrupt.hpp"

#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <mutex>
#include <stdexcept>

namespace dtsim::interrupt {

namespace {

// Everything the handler reads is fixed-size and lock-free: a handler may only call
// async-signal-safe functions (unlink, kill, _exit) and touch lock-free atomics.
struct FileSlot {
  std::atomic<bool> used{false};
  char path[4096]{};
};
// Constant-initialised, so that start-up does not touch its 32 pages (a page fault each).
constinit std::array<FileSlot, 32> g_files{};
std::mutex g_files_mutex;  // between threads registering files, never taken by the handler
std::array<std::atomic<pid_t>, 256> g_children{};
std::atomic<int> g_held{0}, g_in_handler{0}, g_pending{0};
std::atomic<bool> g_installed{false};

void remove_files() {
  for (auto& f : g_files)
    if (f.used.load()) ::unlink(f.path);
}

void on_signal(int sig) {
  // Announce the handler before reading g_held; Hold does the reverse, so with sequentially
  // consistent atomics one of the two always sees the other (either the holder waits for this
  // handler to end the process, or this handler sees the hold and defers).
  g_in_handler.fetch_add(1);
  for (auto& c : g_children)
    if (const pid_t pid = c.load(); pid > 0) ::kill(pid, sig);
  if (g_held.load() > 0) {
    g_pending.store(sig);
    g_in_handler.fetch_sub(1);
    return;
  }
  remove_files();
  ::_exit(128 + sig);
}

}  // namespace

void install() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, SIGINT);
  sigaddset(&sa.sa_mask, SIGTERM);
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::signal(SIGXFSZ, SIG_IGN);
  g_installed.store(true);
}

void reclaim() {
  if (g_installed.load()) install();
}

int watch_file(const std::string& path) {
  std::lock_guard lock(g_files_mutex);
  if (path.size() >= sizeof(FileSlot::path)) throw std::runtime_error("path too long: " + path);
  for (std::size_t i = 0; i < g_files.size(); ++i)
    if (!g_files[i].used.load()) {
      std::memcpy(g_files[i].path, path.c_str(), path.size() + 1);
      g_files[i].used.store(true);
      return static_cast<int>(i);
    }
  throw std::runtime_error("more than 32 temporary files at once");
}

void forget_file(int slot) {
  if (slot >= 0) g_files[static_cast<std::size_t>(slot)].used.store(false);
}

void watch_child(pid_t pid) {
  for (auto& c : g_children) {
    pid_t empty = 0;
    if (c.compare_exchange_strong(empty, pid)) return;
  }
  throw std::runtime_error("more than 256 child processes at once");
}

void forget_child(pid_t pid) {
  for (auto& c : g_children) {
    pid_t mine = pid;
    if (c.compare_exchange_strong(mine, 0)) return;
  }
}

Hold::Hold() {
  g_held.fetch_add(1);
  // A handler that started before the hold will end the process; wait for it rather than race it.
  while (g_in_handler.load() > 0) ::sched_yield();
}

Hold::~Hold() { g_held.fetch_sub(1); }

int pending() { return g_pending.load(); }

void exit_if_pending() {
  if (g_held.load() > 0) return;  // the outer holder decides
  if (const int sig = g_pending.load()) {
    remove_files();
    std::cout.flush();
    std::fflush(nullptr);
    ::_exit(128 + sig);
  }
}

}  // namespace dtsim::interrupt
