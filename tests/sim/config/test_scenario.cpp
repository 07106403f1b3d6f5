#include <gtest/gtest.h>

#include "sim/config/scenario.hpp"
#include "sim/core/errors.hpp"
#include "helpers.hpp"

using namespace dtsim;

namespace {


// Loads `child` written beside the base scenario and returns the error it raises.
InputError error_of(const std::string& child) {
  test::TempDir dir;
  dir.file("base.json", test::kValidScenario);
  std::string f = dir.file("child.json", child);
  try {
    config::load_scenario(f);
  } catch (const InputError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << child;
  return InputError("", "", "");
}

}  // namespace

TEST(Scenario, ExtendsMergesChildOverBase) {
  test::TempDir dir;
  dir.file("base.json", test::kValidScenario);
  auto s = config::load_scenario(dir.file("c.json", R"({"extends": "base.json", "name": "child",
      "cluster": {"inter_node": {"nic_bandwidth_GBps": null, "nic_bandwidth_Gbps": 400}}})"));
  EXPECT_EQ(s.name, "child");
  EXPECT_DOUBLE_EQ(s.cluster.nic_bandwidth, 50e9);      // 400 Gb/s, child
  EXPECT_DOUBLE_EQ(s.cluster.inter_latency, 5e-6);      // base, merged not replaced
  EXPECT_EQ(s.cluster.nics_per_node, 8);
  EXPECT_EQ(s.model_preset, "gpt2");
  EXPECT_EQ(s.parallelism.data, 8);
}

TEST(Scenario, PresetValuesCanBeOverridden) {
  test::TempDir dir;
  dir.file("base.json", test::kValidScenario);
  auto s = config::load_scenario(dir.file("c.json", R"({"extends": "base.json", "model": {"seq_len": 2048}})"));
  EXPECT_EQ(s.model.transformer()->seq_len, 2048);
  EXPECT_EQ(s.model.transformer()->num_layers, 12);
}

TEST(Scenario, UnitSuffixesConvertToSI) {
  test::TempDir dir;
  dir.file("base.json", test::kValidScenario);
  auto s = config::load_scenario(dir.file("c.json", R"({"extends": "base.json",
      "cluster": {"intra_node": {"latency_us": null, "latency_ms": 0.004}}})"));
  EXPECT_DOUBLE_EQ(s.cluster.intra_latency, 4e-6);
}

TEST(Scenario, UnknownKeyNamesItsPointer) {
  auto e = error_of(R"({"extends": "base.json", "parallelism": {"dataa": 16}})");
  EXPECT_EQ(e.pointer(), "/parallelism/dataa");
  EXPECT_NE(std::string(e.what()).find("unknown key"), std::string::npos);
}

TEST(Scenario, InheritedValueErrorNamesTheFileThatSetIt) {
  // 64 samples cannot be split over 8 ranks x 16: the offending value lives in base.json.
  auto e = error_of(R"({"extends": "base.json", "parallelism": {"micro_batch_size": 16}})");
  EXPECT_EQ(e.pointer(), "/training/global_batch_size");
  EXPECT_NE(e.file().find("base.json"), std::string::npos);
}

TEST(Scenario, SameQuantityInTwoUnitsIsAnError) {
  auto e = error_of(R"({"extends": "base.json", "cluster": {"intra_node": {"latency_ms": 0.002}}})");
  EXPECT_EQ(e.pointer().rfind("/cluster/intra_node/latency_", 0), 0u) << e.pointer();
  EXPECT_NE(std::string(e.what()).find("second time"), std::string::npos);
}

TEST(Scenario, ImpossibleNumbersAreRejected) {
  EXPECT_EQ(error_of(R"({"extends": "base.json", "model": {"num_layers": 1e30}})").pointer(), "/model/num_layers");
  EXPECT_EQ(error_of(R"({"extends": "base.json", "model": {"num_layers": 0}})").pointer(), "/model/num_layers");
  EXPECT_EQ(error_of(R"({"extends": "base.json", "cluster": {"nodes": 0}})").pointer(), "/cluster/nodes");
  EXPECT_EQ(error_of(R"({"extends": "base.json", "cluster": {"intra_node": {"bandwidth_GBps": -1}}})").pointer(),
            "/cluster/intra_node/bandwidth_GBps");
  EXPECT_EQ(error_of(R"({"extends": "base.json", "model": {"num_heads": 7}})").pointer(), "/model/num_heads");
}

TEST(Scenario, ExtendsCycleIsReported) {
  test::TempDir dir;
  dir.file("a.json", R"({"extends": "b.json"})");
  std::string b = dir.file("b.json", R"({"extends": "a.json"})");
  try {
    config::load_scenario(b);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.pointer(), "/extends");
  }
}

TEST(Scenario, UnknownPresetListsKnownOnes) {
  auto e = error_of(R"({"extends": "base.json", "model": {"preset": "gpt5"}})");
  EXPECT_EQ(e.pointer(), "/model/preset");
  EXPECT_NE(std::string(e.what()).find("gpt3-175b"), std::string::npos);
}

TEST(Scenario, EveryShippedScenarioLoads) {
  for (const auto& entry : std::filesystem::recursive_directory_iterator(test::source_dir() + "/scenarios")) {
    // Base files are fragments that other scenarios extend.
    if (entry.path().extension() != ".json" || entry.path().parent_path().filename() == "base" ||
        entry.path().stem() == "base")
      continue;
    EXPECT_NO_THROW(config::load_scenario(entry.path().string())) << entry.path();
  }
}

TEST(Scenario, OneGpusThrottlesMustNotOverlap) {
  EXPECT_EQ(error_of(R"({"extends": "base.json", "stragglers": {"throttles": [{"gpu": 3, "start_s": 0, "duration_s": 1, "slowdown": 2},
      {"gpu": 3, "start_s": 0.5, "duration_s": 1, "slowdown": 2}]}})").pointer(), "/stragglers/throttles/1");
}

TEST(Scenario, AFlappingLinkMustChangeSomething) {
  EXPECT_EQ(error_of(R"({"extends": "base.json", "stragglers": {"flapping_links": [{"gpu": 0, "period_s": 1, "degraded_s": 0.5}]}})").pointer(),
            "/stragglers/flapping_links/0");
}

TEST(Scenario, FabricsAndBackgroundTrafficAreChecked) {
  EXPECT_EQ(error_of(R"({"extends": "base.json", "cluster": {"background_traffic": {"nic": 1.5}}})").pointer(),
            "/cluster/background_traffic/nic");
  // The base cluster is fat-tree without oversubscription: no uplinks to load.
  EXPECT_EQ(error_of(R"({"extends": "base.json", "cluster": {"background_traffic": {"uplink": 0.5}}})").pointer(),
            "/cluster/background_traffic/uplink");
  EXPECT_EQ(error_of(R"({"extends": "base.json", "cluster": {"intra_node": {"host_bridge_bandwidth_GBps": 50}}})").pointer(),
            "/cluster/intra_node/fabric");
  EXPECT_EQ(error_of(R"({"extends": "base.json", "cluster": {"gpus_per_node": 2, "nodes": 4,
      "inter_node": {"nics_per_node": 2}, "intra_node": {"fabric": "nvlink-ring"}}})").pointer(), "/cluster/intra_node/fabric");
}

TEST(Scenario, MeasuredAllReduceEfficienciesAreChecked) {
  for (const char* points : {R"([[4e6, 0.4], [2e6, 0.5]])", R"([[4e6, 1.5]])", R"([[4e6]])", R"([])", R"("fast")"})
    EXPECT_EQ(error_of(std::string(R"({"extends": "base.json", "cluster": {"intra_node": {"efficiency_points": )") + points + "}}}")
                  .pointer(),
              "/cluster/intra_node/efficiency_points")
        << points;
}
