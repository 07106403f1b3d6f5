// The model presets as the command line lists them.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <tuple>

#include "helpers.hpp"

TEST(CliModels, ListShowsEveryPresetWithItsParameterCount) {
  dtsim::test::TempDir dir;
  const std::string out = dir.path("out.txt");
  ASSERT_EQ(std::system((std::string(DTSIM_BINARY) + " list models > " + out).c_str()), 0);
  std::stringstream ss;
  ss << std::ifstream(out).rdbuf();
  const std::string text = ss.str();
  // Each preset on its own line: name, family, parameters in millions.
  const std::tuple<const char*, const char*, const char*> rows[] = {
      {"resnet-50", "cnn", "25.56"}, {"resnet-101", "cnn", "44.55"}, {"vgg-16", "cnn", "138.36"},
      {"inception-v3", "cnn", "23.83"}, {"amoebanet-d", "cnn", "122.47"}, {"vit-b-16", "vit", "86.57"},
      {"vit-l-16", "vit", "304.33"}, {"vit-h-14", "vit", "632.05"}, {"gpt2", "transformer", "124.44"}};
  for (const auto& [name, kind, millions] : rows) {
    std::istringstream lines(text);
    bool found = false;
    for (std::string line; std::getline(lines, line);) {
      std::istringstream words(line);
      std::string n, k, m, unit;
      words >> n >> k >> m >> unit;
      found = found || (n == name && k == kind && m == millions && unit == "M");
    }
    EXPECT_TRUE(found) << name << "\n" << text;
  }
}
