// Issue 14, item 6: `dtsim collective --op all_to_all` as nccl-tests' alltoall_perf reports it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "run_dtsim.hpp"

using namespace dtsim;

namespace {

nlohmann::json table(const std::vector<std::string>& args, const test::TempDir& dir) {
  auto r = test::run_dtsim(args, dir);
  EXPECT_EQ(r.code, 0) << r.err;
  return r.code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
}

}  // namespace

// Without --algorithm an all-to-all runs direct (every GPU sends its share to every other at
// once). Bus bandwidth follows nccl-tests (src/alltoall.cu, doc/PERFORMANCE.md): busbw = algbw x
// (n-1)/n, algbw = S / t. On one node of the default cluster (300 GB/s NVSwitch ports at 77.2 %
// efficiency) each GPU sends (n-1)/n S through its port, so t = (n-1)/n S / (300 GB/s x 0.772) plus
// latency, and busbw tends to the port's 231.6 GB/s.
TEST(MoeCli, AllToAllDefaultsToDirectWithNcclTestsBusBandwidth) {
  test::TempDir dir;
  const auto j = table({"collective", "--op", "all_to_all", "--gpus", "8", "-b", "1G", "-e", "1G", "--analytical", "--format", "json"}, dir);
  ASSERT_FALSE(j.is_null());
  EXPECT_EQ(j["algorithm"], "direct");
  const auto& row = j["rows"][0];
  const double S = 1073741824.0, n = 8, port = 300e9 * 0.772;
  const double t = (n - 1) / n * S / port;
  EXPECT_NEAR(row["time_us"].get<double>() / 1e6, t, 0.001 * t + 20e-6);
  EXPECT_NEAR(row["busbw_GBps"].get<double>(), row["algbw_GBps"].get<double>() * (n - 1) / n, 1e-9);
  EXPECT_NEAR(row["busbw_GBps"].get<double>(), port / 1e9, 0.01 * port / 1e9);
  // Across two nodes half of each GPU's data leaves through its NIC: much lower bus bandwidth.
  const auto two = table({"collective", "--op", "all_to_all", "--gpus", "16", "-b", "1G", "-e", "1G", "--analytical", "--format", "json"}, dir);
  ASSERT_FALSE(two.is_null());
  EXPECT_LT(two["rows"][0]["busbw_GBps"].get<double>(), 0.5 * row["busbw_GBps"].get<double>());
  // Other operations keep ring.
  const auto ar = table({"collective", "--op", "all_reduce", "--gpus", "8", "-b", "1M", "-e", "1M", "--analytical", "--format", "json"}, dir);
  EXPECT_EQ(ar["algorithm"], "ring");
}

// Issue 14, item 8: the sweep tries expert-parallel sizes for a mixture of experts (powers of two
// dividing both the data-parallel GPUs and the experts), and only 1 for a dense model.
TEST(MoeCli, SweepExploresExpertParallelism) {
  test::TempDir dir;
  const std::string moe = dir.file("moe.json", R"({"name": "moe", "model": {"kind": "transformer", "num_layers": 4,
      "hidden_size": 1024, "num_heads": 8, "ffn_hidden_size": 2048, "seq_len": 1024, "vocab_size": 1000, "mlp": "swiglu",
      "tied_embeddings": false, "linear_bias": false, "dropout": false, "num_experts": 16, "experts_per_token": 2,
      "expert_ffn_hidden_size": 2048},
    "hardware": {"device": "h100-sxm-80gb"}, "cluster": {"preset": "dgx-h100", "nodes": 2},
    "parallelism": {"data": 16}, "training": {"global_batch_size": 64, "attention": "flash"}})");
  const auto j = table({"sweep", moe, "--format", "json", "--top", "100000", "--jobs", "2", "--write-best", dir.path("best.json")}, dir);
  ASSERT_FALSE(j.is_null());
  std::set<int> sizes;
  for (const auto& row : j["rows"]) sizes.insert(row["expert"].get<int>());
  EXPECT_EQ(sizes, (std::set<int>{1, 2, 4, 8, 16}));
  const auto& best = j["rows"][0];
  EXPECT_GT(best["expert"].get<int>(), 1);  // all-to-alls inside a node beat replicating every expert
  EXPECT_NE(best["strategy"].get<std::string>().find(" ep"), std::string::npos);
  const auto written = nlohmann::json::parse(test::slurp(dir.path("best.json")));
  EXPECT_EQ(written["parallelism"]["expert"], best["expert"]);
  EXPECT_EQ(test::run_dtsim({"run", dir.path("best.json"), "--format", "json"}, dir).code, 0);
}
