// The signal handling that output sets rely on, signalled at an exact point: a temporary file
// being written when SIGTERM or SIGINT arrives is removed and dtsim exits 143 or 130; while a
// complete set is renamed into place (a Hold), the signal waits.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>

#include "helpers.hpp"
#include "sim/core/interrupt.hpp"

using namespace dtsim;
namespace fs = std::filesystem;

TEST(InterruptDeathTest, SignalWhileWritingRemovesTheTemporaryAndExits143Or130) {
  for (int sig : {SIGTERM, SIGINT}) {
    test::TempDir dir;
    const std::string tmp = dir.file(".result.json.0123.tmp", "half a file");
    EXPECT_EXIT(
        {
          interrupt::install();
          interrupt::watch_file(tmp);
          ::raise(sig);
          std::ofstream(dir.path("after-the-signal"));  // never reached
        },
        ::testing::ExitedWithCode(128 + sig), "");
    EXPECT_FALSE(fs::exists(tmp));
    EXPECT_FALSE(fs::exists(dir.path("after-the-signal")));
  }
}

TEST(InterruptDeathTest, SignalWhileHeldWaitsUntilTheSetIsInPlace) {
  test::TempDir dir;
  const std::string tmp = dir.file(".result.json.0123.tmp", "whole file");
  EXPECT_EXIT(
      {
        interrupt::install();
        const int slot = interrupt::watch_file(tmp);
        {
          interrupt::Hold hold;
          ::raise(SIGTERM);
          if (interrupt::pending() != SIGTERM) ::_exit(1);
          fs::rename(tmp, dir.path("result.json"));  // the work the hold protects completes
          interrupt::forget_file(slot);
          interrupt::exit_if_pending();  // still held: does nothing
        }
        interrupt::exit_if_pending();
        ::_exit(2);  // never reached
      },
      ::testing::ExitedWithCode(143), "");
  EXPECT_TRUE(fs::exists(dir.path("result.json")));
  EXPECT_FALSE(fs::exists(tmp));
}
