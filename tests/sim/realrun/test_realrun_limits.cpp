// Issue 25 (Trust 2), realrun: workers that would not fit in this machine's memory are refused
// before anything starts, and a SIGKILL during the shaped network's setup leaves no link in the
// host's namespace, only namespaces the next run removes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "run_dtsim.hpp"
#include "sim/realrun/netns.hpp"

using namespace dtsim;
namespace fs = std::filesystem;

namespace {

double mem_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, rest;
  double kib = 0;
  while (in >> key >> kib) {
    std::getline(in, rest);
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

// What `ip -o link` lists in this (the host's) namespace.
std::string host_links(const test::TempDir& dir) {
  const std::string file = dir.path("links.txt");
  (void)std::system(("/usr/sbin/ip -o link > " + file + " 2>&1").c_str());
  return test::slurp(file);
}

int namespaces_of(pid_t pid) {
  int n = 0;
  std::error_code ec;
  const std::string prefix = "dtsim-" + std::to_string(pid) + "-";
  for (const auto& e : fs::directory_iterator("/run/netns", ec))
    if (e.path().filename().string().rfind(prefix, 0) == 0) ++n;
  return n;
}

}  // namespace

// GPT-2's feed-forward stack at micro-batch 341 is 193 GB a worker by dtsim's own estimate
// (step_working_set_bytes); 16 of them used to start and fail (exit 1), or wake the OOM killer.
TEST(RealrunMemory, WorkersBeyondTheMachinesMemoryAreRefusedBeforeStarting) {
  const double need = 16 * 193e9;
  if (mem_available_bytes() > need) GTEST_SKIP() << "this machine has over 3 TB available";
  test::TempDir dir;
  const auto r = test::run_dtsim({"realrun", "--model", "gpt2", "--micro-batch", "341", "--workers", "16", "--timeout", "20"}, dir);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("error: --micro-batch: 16 workers of gpt2 at micro-batch 341 need about"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("GB this machine has available (MemAvailable"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("measuring loopback"), std::string::npos) << r.err;  // nothing started
  EXPECT_EQ(r.out, "");
}

TEST(RealrunNetns, SigkillDuringSetupLeavesNoHostLinkAndTheNextRunClearsIt) {
  if (geteuid() != 0 || access("/usr/sbin/ip", X_OK) != 0 || access("/usr/sbin/tc", X_OK) != 0)
    GTEST_SKIP() << "shaping needs root and iproute2 (ip, tc)";
  test::TempDir dir;
  std::vector<std::string> args{DTSIM_BINARY, "realrun", "--workers", "16", "--steps", "1", "--bandwidth-Gbps", "1"};
  if (const char* other = std::getenv("DTSIM_TEST_BINARY")) args[0] = other;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, 2, dir.path("stderr.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  ASSERT_EQ(posix_spawn(&pid, argv[0], &files, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&files);
  // Watch the host's links while the namespaces are made; kill half way through.
  const std::string mine = "dr" + std::to_string(pid);
  bool host_link = false;
  int status = 0;
  for (int i = 0; i < 20000 && namespaces_of(pid) < 9; ++i) {
    host_link = host_link || host_links(dir).find(mine) != std::string::npos;
    if (waitpid(pid, &status, WNOHANG) == pid) FAIL() << "realrun ended before its network was set up: " << test::slurp(dir.path("stderr.txt"));
  }
  ASSERT_GE(namespaces_of(pid), 9) << test::slurp(dir.path("stderr.txt"));
  kill(pid, SIGKILL);
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the `ip` it had started finishes
  EXPECT_FALSE(host_link) << "a link of the shaped network was made in the host's namespace";
  EXPECT_EQ(host_links(dir).find(mine), std::string::npos) << host_links(dir);
  // What is left are namespaces of a process that is gone: the next shaped network removes them.
  const auto stale = realrun::stale_namespaces("/run/netns");
  EXPECT_NE(std::find(stale.begin(), stale.end(), "dtsim-" + std::to_string(pid) + "-switch"), stale.end());
  { realrun::ShapedNetwork next(2, 1.0); }
  EXPECT_EQ(namespaces_of(pid), 0);
}
