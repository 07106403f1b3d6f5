// Issue 28 item 2: SimGrid is loaded (libdtsim_simgrid.so, beside dtsim) only by a replay on
// SimGrid, so the commands that never replay on it start without its libraries.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "helpers.hpp"
#include "run_dtsim.hpp"

using namespace dtsim;

namespace {

// What the dynamic loader loads for `args` (LD_DEBUG=libs writes it to stderr).
std::string libraries_loaded(const std::vector<std::string>& args, const test::TempDir& dir) {
  setenv("LD_DEBUG", "libs", 1);
  const auto r = test::run_dtsim(args, dir);
  unsetenv("LD_DEBUG");
  return r.err;
}

std::string scenario(const std::string& backend) {
  return R"({"schema_version": 1, "name": "module", "model": {"preset": "gpt2"}, "hardware": {"device": "a100-sxm-80gb"},
    "cluster": {"preset": "dgx-a100", "nodes": 1}, "parallelism": {"data": 8}, "training": {"global_batch_size": 64},
    "simulation": {"backend": ")" + backend + R"("}})";
}

}  // namespace

TEST(SimGridModule, OnlyASimGridReplayLoadsSimGrid) {
  test::TempDir dir;
  const std::string analytical = dir.file("analytical.json", scenario("analytical"));
  const std::string simgrid = dir.file("simgrid.json", scenario("simgrid"));
  EXPECT_EQ(libraries_loaded({"--version"}, dir).find("libsimgrid"), std::string::npos);
  EXPECT_EQ(libraries_loaded({"run", analytical, "-o", dir.path("a")}, dir).find("libsimgrid"), std::string::npos);
  const std::string loaded = libraries_loaded({"run", simgrid, "-o", dir.path("s")}, dir);
  EXPECT_NE(loaded.find("libdtsim_simgrid.so"), std::string::npos) << loaded.substr(0, 2000);
  EXPECT_NE(loaded.find("libsimgrid"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(dir.path("s/result.json")));
}

// A module beside the binary that is not one: exit 2, naming the file, saying what still works.
TEST(SimGridModule, ABrokenModuleIsAClearError) {
  test::TempDir dir;
  const std::string exe = dir.path("dtsim");
  std::filesystem::copy_file(DTSIM_BINARY, exe);
  std::filesystem::permissions(exe, std::filesystem::perms::owner_all);
  dir.file("libdtsim_simgrid.so", "not a library");
  const std::string simgrid = dir.file("simgrid.json", scenario("simgrid"));
  setenv("DTSIM_TEST_BINARY", exe.c_str(), 1);
  const auto r = test::run_dtsim({"run", simgrid, "-o", dir.path("s")}, dir);
  const auto fine = test::run_dtsim({"run", dir.file("analytical.json", scenario("analytical")), "-o", dir.path("a")}, dir);
  unsetenv("DTSIM_TEST_BINARY");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("error: cannot load " + dir.path("libdtsim_simgrid.so")), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the simgrid backend is not available (\"backend\": \"analytical\" needs no module)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(fine.code, 0) << fine.err;
}
