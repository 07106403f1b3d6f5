// Issue 15 item 5: the real data-parallel trainer behind `dtsim realrun`. Its gradient exchange
// must sum exactly; the command must run end to end and refuse link shaping without root. No
// assertion on timings: the machine running the tests is busy.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "run_dtsim.hpp"
#include "sim/realrun/comm.hpp"
#include "sim/realrun/speed_check.hpp"
#include "sim/realrun/trainer.hpp"

using namespace dtsim;
using namespace dtsim::realrun;

namespace {

// Rank r's buffer: small integers, so every float sum is exact whatever the order.
std::vector<float> contribution(int rank, std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>((rank + 1) * 1000 + static_cast<int>(i % 997));
  return v;
}

std::vector<float> expected_sum(int ranks, std::size_t n) {
  std::vector<float> s(n, 0.0f);
  for (int r = 0; r < ranks; ++r) {
    const auto c = contribution(r, n);
    for (std::size_t i = 0; i < n; ++i) s[i] += c[i];
  }
  return s;
}

// n ranks on threads, each with its own io_context and a ring of loopback connections.
std::vector<std::vector<float>> ring_on_threads(int n, std::size_t count) {
  std::vector<asio::io_context> io(static_cast<std::size_t>(n));
  std::vector<tcp::acceptor> acceptors;
  for (int r = 0; r < n; ++r) acceptors.push_back(listen_loopback(io[static_cast<std::size_t>(r)]));
  std::vector<std::vector<float>> data(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      const auto i = static_cast<std::size_t>(r);
      auto next = connect_loopback(io[i], acceptors[static_cast<std::size_t>((r + 1) % n)].local_endpoint().port());
      auto prev = accept_one(acceptors[i]);
      data[i] = contribution(r, count);
      ring_allreduce(io[i], data[i], r, n, next, prev);
      ring_allreduce(io[i], data[i], r, n, next, prev);  // twice: the connections stay usable, sums add up again
    });
  for (auto& t : threads) t.join();
  return data;
}

using test::Outcome;
using test::slurp;

// Through a shell: some tests put a command before dtsim (e.g. to drop root).
Outcome dtsim_cli(const std::string& args, const test::TempDir& dir, const std::string& prefix = "") {
  const std::string out = dir.path("stdout.txt"), err = dir.path("stderr.txt");
  const std::string cmd = prefix + std::string(DTSIM_BINARY) + " " + args + " > " + out + " 2> " + err;
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
}

void expect_well_formed(const nlohmann::json& j, const std::string& algorithm) {
  EXPECT_EQ(j["algorithm"], algorithm);
  EXPECT_EQ(j["workers"], 2);
  for (const char* p : {"/measured/step_s", "/measured/allreduce_s", "/predicted/step_s", "/predicted/allreduce_s",
                        "/link/latency_us", "/link/bandwidth_GBps"}) {
    ASSERT_TRUE(j.contains(nlohmann::json::json_pointer(p))) << p;
    EXPECT_GT(j[nlohmann::json::json_pointer(p)].get<double>(), 0.0) << p;
  }
  EXPECT_EQ(j["measured"]["step_series_s"].size(), 2u);
  // Where the compute's time went: CPU time of the slowest worker, and how far apart the
  // workers' gradients were ready.
  EXPECT_GT(j["measured"]["compute_cpu_s"].get<double>(), 0.0);
  EXPECT_GE(j["measured"]["compute_spread_s"].get<double>(), 0.0);
  // tiny-gpt on 2 workers: 2 x 32,505,856 bytes (RealrunTrainer.WorkingSetByHand); timed cold
  // when that exceeds the last-level cache.
  const auto& k = j["kernel_timing"];
  EXPECT_DOUBLE_EQ(k["working_set_bytes"].get<double>(), 2 * 32505856.0);
  if (k["last_level_cache_bytes"].get<double>() > 0) {
    EXPECT_EQ(k["cold"].get<bool>(), k["working_set_bytes"].get<double>() > k["last_level_cache_bytes"].get<double>());
  }
  // The machine's speed in both phases: the companions' compute while profiling against the
  // workers' in training. With --repeats 1 the profile may end before a companion's third step.
  const auto& sc = j["speed_check"];
  EXPECT_DOUBLE_EQ(sc["training_compute_s"].get<double>(), j["measured"]["compute_s"].get<double>());
  EXPECT_NEAR(sc["cpu_share"].get<double>(), j["measured"]["compute_cpu_s"].get<double>() / j["measured"]["compute_s"].get<double>(), 1e-9);
  if (sc["checked"].get<bool>()) {
    EXPECT_GE(sc["samples"].get<int>(), kMinSpeedSamples);
    EXPECT_GT(sc["profiling_compute_s"].get<double>(), 0.0);
    EXPECT_NEAR(sc["drift_percent"].get<double>(),
                100 * (sc["profiling_compute_s"].get<double>() / sc["training_compute_s"].get<double>() - 1), 1e-9);
  } else {
    EXPECT_FALSE(sc["why"].empty());
  }
  EXPECT_DOUBLE_EQ(sc["table_compute_s"].get<double>(), j["predicted"]["compute_s"].get<double>());
  EXPECT_EQ(sc["trusted"].get<bool>(),
            sc["cpu_share"].get<double>() >= kMinCpuShare &&
                (!sc["checked"].get<bool>() || (std::abs(sc["drift_percent"].get<double>()) <= 100 * kSpeedTolerance &&
                                                std::abs(sc["table_gap_percent"].get<double>()) <= 100 * kTableTolerance)));
  EXPECT_TRUE(j["error_percent"]["step"].is_number());
  EXPECT_TRUE(j["error_percent"]["allreduce"].is_number());
  // The exchange is part of the step.
  EXPECT_LT(j["measured"]["allreduce_s"].get<double>(), j["measured"]["step_s"].get<double>());
  EXPECT_LT(j["predicted"]["allreduce_s"].get<double>(), j["predicted"]["step_s"].get<double>());
}

}  // namespace

TEST(RealrunRing, ThreeWorkersEndWithTheExactSum) {
  for (std::size_t count : {std::size_t{1001}, std::size_t{100000}, std::size_t{2}}) {  // uneven chunks, one empty
    const auto data = ring_on_threads(3, count);
    auto want = expected_sum(3, count);
    for (auto& x : want) x *= 3;  // the second all-reduce sums three copies of the first's result
    for (int r = 0; r < 3; ++r) EXPECT_EQ(data[static_cast<std::size_t>(r)], want) << "rank " << r << ", " << count << " floats";
  }
}

TEST(RealrunParameterServer, ThreeWorkersPullTheExactSum) {
  constexpr int n = 3;
  constexpr std::size_t count = 50001;
  asio::io_context server_io;
  auto acceptor = listen_loopback(server_io);
  const auto port = acceptor.local_endpoint().port();
  std::vector<std::vector<float>> data(n);
  std::vector<std::thread> workers;
  for (int r = 0; r < n; ++r)
    workers.emplace_back([&, r] {
      asio::io_context io;
      auto s = connect_loopback(io, port);
      data[static_cast<std::size_t>(r)] = contribution(r, count);
      ps_push_pull(io, data[static_cast<std::size_t>(r)], s);
    });
  std::vector<tcp::socket> conns;
  for (int r = 0; r < n; ++r) conns.push_back(accept_one(acceptor));
  std::vector<std::vector<float>> in(static_cast<std::size_t>(n), std::vector<float>(count));
  ps_serve_round(server_io, conns, in);
  for (auto& t : workers) t.join();
  const auto want = expected_sum(n, count);
  for (int r = 0; r < n; ++r) EXPECT_EQ(data[static_cast<std::size_t>(r)], want) << "rank " << r;
}

TEST(RealrunTrainer, WorkingSetByHand) {
  // tiny-gpt's feed-forward stack: 256 -> (1024 -> 256) x 4 over 256 tokens.
  const MlpShape s{256, {256, 1024, 256, 1024, 256, 1024, 256, 1024, 256}};
  ASSERT_EQ(s.params(), 2097152);
  // Weights and gradients: 8 bytes per parameter = 16,777,216. Activations after the input:
  // 256 x (4 x 1024 + 4 x 256) = 1,310,720 floats, three times, 4 bytes each = 15,728,640.
  EXPECT_DOUBLE_EQ(step_working_set_bytes(s), 16777216.0 + 15728640.0);
}

TEST(RealrunSpeedCheck, CompanionLinesAreSteps) {
  // Two whole lines, then the line a companion was killed in the middle of.
  EXPECT_EQ(companion_steps("0.050000000 0.049000000\n0.060000000 0.058000000\n0.0700"),
            (std::vector<double>{0.05, 0.06}));
  EXPECT_TRUE(companion_steps("").empty());
  EXPECT_TRUE(companion_steps("garbage\n").empty());
}

TEST(RealrunSpeedCheck, MedianOfCompanionsAfterWarmupAgainstTraining) {
  // Warm-up steps (1.0 s) left out; the rest's median is 0.054 s against 0.050 s in training.
  const auto c = check_speed({{1.0, 0.053, 0.054}, {1.0, 0.055, 0.060, 0.052}}, 0.050, 0.049, 0.0, 1);
  ASSERT_TRUE(c.checked);
  EXPECT_EQ(c.samples, 5);
  EXPECT_DOUBLE_EQ(c.profiling_compute_s, 0.054);
  EXPECT_NEAR(c.drift, 0.08, 1e-12);
  EXPECT_FALSE(c.trusted);  // 8 % > 5 %
  ASSERT_EQ(c.why.size(), 1u);
  EXPECT_NE(c.why[0].find("8.0 % longer"), std::string::npos) << c.why[0];
}

TEST(RealrunSpeedCheck, WithinToleranceEitherWayIsTrusted) {
  EXPECT_TRUE(check_speed({{0.052, 0.052, 0.052}}, 0.050, 0.050, 0.0, 0).trusted);  // +4 %
  EXPECT_TRUE(check_speed({{0.048, 0.048, 0.048}}, 0.050, 0.050, 0.0, 0).trusted);  // -4 %
  const auto faster = check_speed({{0.045, 0.045, 0.045}}, 0.050, 0.050, 0.0, 0);  // -10 %
  EXPECT_FALSE(faster.trusted);
  ASSERT_EQ(faster.why.size(), 1u);
  EXPECT_NE(faster.why[0].find("10.0 % less time"), std::string::npos) << faster.why[0];
}

TEST(RealrunSpeedCheck, WorkersWithoutTheirCoresAreNotTrusted) {
  // Measured here with compilers beside the workers: 41 ms of CPU in 148 ms of compute; the
  // companions were as slow while profiling, so only the CPU share can tell.
  const auto c = check_speed({{0.150, 0.149, 0.147}}, 0.148, 0.041, 0.0, 0);
  EXPECT_NEAR(c.cpu_share, 0.041 / 0.148, 1e-12);
  EXPECT_TRUE(c.checked);
  EXPECT_FALSE(c.trusted);
  ASSERT_EQ(c.why.size(), 1u);
  EXPECT_NE(c.why[0].find("only 28 %"), std::string::npos) << c.why[0];
  EXPECT_TRUE(check_speed({{0.050, 0.050, 0.050}}, 0.050, 0.046, 0.0, 0).trusted);  // 92 %
}

TEST(RealrunSpeedCheck, ATableBelowTheStepBesideItIsNotTrusted) {
  // Measured here, quiet: the companions' compute 50.5 ms while profiling, 48.6 ms in training
  // (steady), but the table priced it at 39.6 ms: 22 % below.
  const auto c = check_speed({{0.0505, 0.0505, 0.0505}}, 0.0486, 0.0481, 0.0396, 0);
  EXPECT_NEAR(c.table_gap, 0.0396 / 0.0505 - 1, 1e-12);
  EXPECT_FALSE(c.trusted);
  ASSERT_EQ(c.why.size(), 1u);
  EXPECT_NE(c.why[0].find("prices the compute at 39.60 ms"), std::string::npos) << c.why[0];
  EXPECT_TRUE(check_speed({{0.0505, 0.0505, 0.0505}}, 0.0486, 0.0481, 0.0470, 0).trusted);  // -6.9 %
}

TEST(RealrunSpeedCheck, TooFewCompanionStepsIsUncheckedNotAlarm) {
  const auto c = check_speed({{1.0, 0.05, 0.05}}, 0.050, 0.050, 0.0, 1);
  EXPECT_FALSE(c.checked);
  EXPECT_TRUE(c.trusted);
  EXPECT_EQ(c.samples, 2);
  ASSERT_EQ(c.why.size(), 1u);
  EXPECT_NE(c.why[0].find("2 companion step(s)"), std::string::npos) << c.why[0];
}

TEST(RealrunCommand, RingTwoWorkersTwoStepsGivesMeasuredAndPredicted) {
  test::TempDir dir;
  const auto r = dtsim_cli("realrun --workers 2 --steps 2 --warmup 1 --repeats 1 --algorithm ring --format json", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  expect_well_formed(nlohmann::json::parse(r.out), "ring");
}

TEST(RealrunCommand, ParameterServerTwoWorkersTwoStepsGivesMeasuredAndPredicted) {
  test::TempDir dir;
  const auto r = dtsim_cli("realrun --workers 2 --steps 2 --warmup 1 --repeats 1 --algorithm parameter-server --format json", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  expect_well_formed(nlohmann::json::parse(r.out), "parameter-server");
}

TEST(RealrunCommand, TextReportNamesBothFigures) {
  test::TempDir dir;
  const auto r = dtsim_cli("realrun --workers 2 --steps 2 --warmup 0 --repeats 1", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("measured_ms"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("step "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("all-reduce"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("machine: the workers held their cores"), std::string::npos) << r.out;
}

TEST(RealrunCommand, ShapingWithoutRootIsRefused) {
  test::TempDir dir;
  // As root, the command runs as the unprivileged user "nobody" (setpriv, util-linux).
  const std::string prefix = geteuid() == 0 ? "setpriv --reuid=65534 --regid=65534 --clear-groups " : "";
  const auto r = dtsim_cli("realrun --workers 2 --steps 1 --bandwidth-Gbps 1", dir, prefix);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("root"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST(RealrunCommand, BadWorkerCountIsAnInputError) {
  test::TempDir dir;
  const auto r = dtsim_cli("realrun --workers 1", dir);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST(RealrunCommand, TimeoutKillsTheWorkers) {
  test::TempDir dir;
  const auto r = dtsim_cli("realrun --workers 2 --steps 10000 --timeout 1 --format json", dir);
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("timed out after 1 s"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST(RealrunCommand, ShapedLinkAsRootRunsAndLeavesNoNamespaces) {
  if (geteuid() != 0 || access("/usr/sbin/ip", X_OK) != 0 || access("/usr/sbin/tc", X_OK) != 0)
    GTEST_SKIP() << "shaping needs root and iproute2 (ip, tc)";
  test::TempDir dir;
  const auto r = dtsim_cli("realrun --workers 2 --steps 2 --warmup 1 --repeats 1 --algorithm parameter-server --bandwidth-Gbps 2 --format json", dir);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["network"], "shaped");
  expect_well_formed(j, "parameter-server");
  // At most the rate asked, per direction (2 Gbit/s = 0.25 GB/s).
  EXPECT_LE(j["link"]["bandwidth_GBps"].get<double>(), 0.25 * 1.05);
  // Nothing of it is left: no namespace named after the command, no veth in this namespace.
  const std::string listing = dir.path("network.txt");
  ASSERT_EQ(std::system(("(/usr/sbin/ip netns list; /usr/sbin/ip link) > " + listing).c_str()), 0);
  const std::string left = slurp(listing);
  EXPECT_NE(left.find("lo:"), std::string::npos) << left;  // the listing worked
  EXPECT_EQ(left.find("dtsim-"), std::string::npos) << left;
  EXPECT_EQ(left.find(": dr"), std::string::npos) << left;
}

TEST(RealrunCommand, AShapedRateOutOfRangeIsAnInputError) {
  test::TempDir dir;
  const auto r = dtsim_cli("realrun --workers 2 --bandwidth-Gbps -1", dir);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--bandwidth-Gbps"), std::string::npos) << r.err;
}
