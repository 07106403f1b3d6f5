// `dtsim describe`, docs/keys.md and the JSON Schemas: what a user reads about the keys is what
// the loader reads, and the files dtsim ships and writes match the schemas it publishes.
#include <gtest/gtest.h>
#include <spawn.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "helpers.hpp"
#include "run_dtsim.hpp"
#include "sim/config/describe.hpp"
#include "strategies/schedule.hpp"

namespace {

using dtsim::test::run_dtsim;
using dtsim::test::slurp;
using dtsim::test::TempDir;
namespace fs = std::filesystem;

const std::string kSource = DTSIM_SOURCE_DIR;

std::vector<std::string> json_files(const std::vector<std::string>& folders) {
  std::vector<std::string> out;
  for (const auto& f : folders)
    for (const auto& e : fs::recursive_directory_iterator(kSource + "/" + f))
      if (e.is_regular_file() && e.path().extension() == ".json") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

// tests/tools/check_schema.py (Debian's python3-jsonschema, not dtsim's code) on these files.
dtsim::test::Outcome check_schema(const std::string& schema, const std::vector<std::string>& files, const TempDir& dir) {
  std::vector<std::string> args{"python3", kSource + "/tests/tools/check_schema.py", kSource + "/docs/" + schema};
  args.insert(args.end(), files.begin(), files.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string out = dir.path("schema.txt");
  posix_spawn_file_actions_t io;
  posix_spawn_file_actions_init(&io);
  posix_spawn_file_actions_addopen(&io, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&io, 1, 2);
  pid_t pid = -1;
  const int spawned = posix_spawnp(&pid, "python3", &io, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&io);
  int status = 0;
  if (spawned == 0) waitpid(pid, &status, 0);
  return {spawned != 0 ? -1000 : WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), ""};
}

bool have_jsonschema() {
  return std::system("python3 -c 'import jsonschema' > /dev/null 2>&1") == 0;
}

TEST(Describe, EveryKeyTheLoaderReadsHasOneLineOfDoc) {
  const auto keys = dtsim::config::declared_keys();
  ASSERT_GT(keys.size(), 200u);
  for (const auto& k : keys) EXPECT_FALSE(k.doc.empty()) << dtsim::config::dotted(k.key) << " has no line in key_docs.cpp";
}

TEST(Describe, EveryDocLineNamesAKeyTheLoaderReads) {
  std::set<std::string> read;
  for (const auto& k : dtsim::config::declared_keys()) read.insert(dtsim::config::doc_id(k.key));
  for (const auto& [id, doc] : dtsim::config::key_docs()) EXPECT_TRUE(read.contains(id)) << id << " is documented but never read";
}

TEST(Describe, TheReferencePageAndTheSchemaAreTheProgramsOutput) {
  TempDir dir;
  const auto page = run_dtsim({"describe", "--format", "markdown"}, dir);
  ASSERT_EQ(page.code, 0) << page.err;
  EXPECT_EQ(page.out, slurp(kSource + "/docs/keys.md")) << "regenerate: dtsim describe --format markdown > docs/keys.md";
  const auto schema = run_dtsim({"describe", "--format", "schema"}, dir);
  ASSERT_EQ(schema.code, 0) << schema.err;
  EXPECT_EQ(schema.out, slurp(kSource + "/docs/scenario.schema.json"))
      << "regenerate: dtsim describe --format schema > docs/scenario.schema.json";
}

TEST(Describe, OneKeyShowsItsUnitsDefaultAndRange) {
  TempDir dir;
  const auto r = run_dtsim({"describe", "hardware.reserved"}, dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("reserved_GiB, reserved_MB"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("default: reserved_GiB = 1"), std::string::npos) << r.out;
  const auto sched = run_dtsim({"describe", "/parallelism/pipeline_schedule"}, dir);
  ASSERT_EQ(sched.code, 0) << sched.err;
  EXPECT_NE(sched.out.find("one of: naive, gpipe, 1f1b, interleaved-1f1b"), std::string::npos) << sched.out;
  EXPECT_NE(sched.out.find("default: \"1f1b\""), std::string::npos) << sched.out;
}

TEST(Describe, AnUnknownKeyIsAnInputErrorNamingTheNearest) {
  TempDir dir;
  const auto r = run_dtsim({"describe", "parallelism.tensr"}, dir);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("did you mean \"parallelism.tensor\""), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST(Describe, TheExampleFilesOfRareKeysLoad) {
  TempDir dir;
  for (const auto& f : json_files({"docs/keys"})) {
    const auto r = run_dtsim({"memory", f}, dir);
    EXPECT_EQ(r.code, 0) << f << ": " << r.err;
  }
}

TEST(Schemas, EveryShippedScenarioMatchesTheScenarioSchema) {
  if (!have_jsonschema()) GTEST_SKIP() << "needs python3 and Debian's python3-jsonschema (scripts/setup.sh installs them)";
  TempDir dir;
  const auto files = json_files({"scenarios", "docs/keys"});
  const auto r = check_schema("scenario.schema.json", files, dir);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(std::to_string(files.size()) + " files, 0 errors"), std::string::npos) << r.out;
}

TEST(Schemas, TheScenarioSchemaRefusesAMisspeltKey) {
  if (!have_jsonschema()) GTEST_SKIP() << "needs python3 and Debian's python3-jsonschema (scripts/setup.sh installs them)";
  TempDir dir;
  const std::string bad = dir.path("bad.json");
  std::ofstream(bad) << R"({"name": "x", "parallelism": {"tensr": 2}, "training": {"precision": "bf17"}})";
  const auto r = check_schema("scenario.schema.json", {bad}, dir);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("'tensr' was unexpected"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("/training/precision"), std::string::npos) << r.out;
}

TEST(Schemas, ResultsMatchTheResultSchema) {
  if (!have_jsonschema()) GTEST_SKIP() << "needs python3 and Debian's python3-jsonschema (scripts/setup.sh installs them)";
  TempDir dir;
  std::vector<std::string> results;
  for (const char* s : {"gpt2-dp8-a100.json", "moe/mixtral-8x7b-64-h100-ep8.json", "cnn/horovod-resnet50-8-25gbe.json",
                        "stragglers/dp64-one-slow-gpu.json", "stacks/llama3-8b-tp4-h100-async-tp.json"}) {
    const std::string out = dir.path(std::string("out") + std::to_string(results.size()));
    const auto r = run_dtsim({"run", kSource + "/scenarios/" + s, "-o", out}, dir);
    ASSERT_EQ(r.code, 0) << s << ": " << r.err;
    results.push_back(out + "/result.json");
  }
  const auto r = check_schema("result.schema.json", results, dir);
  EXPECT_EQ(r.code, 0) << r.out;
  // A result whose breakdown has a negative part is refused: the schema says what users rely on.
  auto j = nlohmann::json::parse(slurp(results[0]));
  j["breakdown_s"]["compute"] = -1.0;
  std::ofstream(dir.path("negative.json")) << j.dump();
  EXPECT_EQ(check_schema("result.schema.json", {dir.path("negative.json")}, dir).code, 1);
}

}  // namespace

namespace {

// One name table per open set: what the loader accepts is what describe lists and what the sweep
// writes back (it once wrote any schedule but three as "1f1b").
TEST(Registries, ScheduleNamesRoundTripAndAreWhatTheLoaderAccepts) {
  const auto names = dtsim::strategies::schedule_names();
  ASSERT_EQ(names.size(), 7u);
  for (const auto& n : names) {
    const auto s = dtsim::strategies::schedule_from_string(n);
    ASSERT_TRUE(s.has_value()) << n;
    EXPECT_EQ(dtsim::strategies::to_string(*s), n);
  }
  EXPECT_FALSE(dtsim::strategies::schedule_from_string("1F1B").has_value());
  for (const auto& k : dtsim::config::declared_keys())
    if (k.key.pointer == "/parallelism/pipeline_schedule") {
      EXPECT_EQ(k.key.choices, names);
    }
}

}  // namespace
