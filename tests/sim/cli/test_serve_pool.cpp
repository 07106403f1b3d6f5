// Issue 28 item 2: `dtsim serve` answers analytical scenarios in process, on a bounded pool of
// threads, with the bytes its child `dtsim run` gave; SimGrid scenarios still go to a child.
#include <gtest/gtest.h>

#include <condition_variable>
#include <future>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "helpers.hpp"
#include "serve_helpers.hpp"
#include "sim/cli/serve_local.hpp"
#include "sim/cli/serve_pool.hpp"

using namespace dtsim;
using namespace dtsim::test::serve;

namespace {

// The run's wall time, the one figure two runs of a scenario may differ in.
std::string without_wall_time(const std::string& json) {
  return std::regex_replace(json, std::regex("\"wall_time_s\": [0-9.eE+-]+"), "\"wall_time_s\": _");
}

std::string gpt2(const std::string& parallelism, const std::string& extra = "") {
  return R"({"schema_version": 1, "name": "pool-test", "model": {"preset": "gpt2"},
  "hardware": {"device": "a100-sxm-80gb"}, "cluster": {"preset": "dgx-a100", "nodes": 1},
  "parallelism": )" + parallelism + R"(, "training": {"global_batch_size": 32, "steps": 1000})" + extra +
         R"(, "simulation": {"backend": "analytical"}})";
}

// Good and bad scenarios of several kinds: pipeline, ZeRO, a CNN, a shipped base (as the server
// rewrites "extends": its absolute path), a run that does not fit, and bad input of each sort.
std::vector<std::string> scenarios() {
  const std::string base = test::source_dir() + "/scenarios/gpt2-dp8-a100.json";
  return {
      gpt2(R"({"data": 2, "pipeline": 4, "micro_batch_size": 2, "pipeline_schedule": "1f1b"})"),
      gpt2(R"({"data": 8, "zero_stage": 3})", R"(, "stragglers": {"seed": 3, "jitter": {"distribution": "lognormal", "sigma": 0.05}})"),
      R"({"schema_version": 1, "name": "cnn", "model": {"preset": "resnet-50"}, "hardware": {"device": "v100-sxm2-32gb"},
         "cluster": {"nodes": 1, "gpus_per_node": 4}, "parallelism": {"data": 4},
         "training": {"global_batch_size": 256}, "simulation": {"backend": "analytical"}})",
      R"({"extends": ")" + base + R"(", "name": "gpt2-dp8-a100", "simulation": {"backend": "analytical"}})",
      R"({"extends": ")" + base + R"(", "name": "too-big", "model": {"preset": "gpt3-175b"}, "simulation": {"backend": "analytical"}})",
      R"({"schema_version": 1, "name": )",                                            // malformed JSON
      gpt2(R"({"data": 3})"),                                                         // 3 GPUs of 8
      gpt2(R"({"data": 8, "pipline": 2})"),                                           // did you mean
      R"({"schema_version": 1, "model": {"preset": "gpt2"}})",                        // no name
  };
}

}  // namespace

TEST(ServePool, InProcessAnswerIsTheChildsByteForByte) {
  for (const auto& s : scenarios()) {
    test::TempDir dir;
    dir.file("scenario.json", s);
    const Cli cli = run_cli(dir.path(), true);
    const auto here = cli::run_here(s, false);
    ASSERT_TRUE(here.has_value()) << s;
    EXPECT_EQ(here->status, cli.code == 0 ? 200 : cli.code == 2 ? 400 : 500) << s << "\n" << cli.err;
    if (cli.code != 0) {
      EXPECT_EQ(here->body, cli.err) << s;
      continue;
    }
    EXPECT_EQ(without_wall_time(here->body), without_wall_time(cli.out)) << s;
    const auto report = cli::run_here(s, true);
    ASSERT_TRUE(report.has_value());
    EXPECT_EQ(report->type, "text/html; charset=utf-8");
    EXPECT_EQ(report->body, cli.report) << s;
  }
}

TEST(ServePool, SimGridScenariosAreLeftToAChild) {
  const std::string simgrid = std::regex_replace(gpt2(R"({"data": 8})"), std::regex("analytical"), "simgrid");
  EXPECT_FALSE(cli::run_here(simgrid, false).has_value());
  // A bad one is answered here all the same: reading it is the same in any process.
  const auto bad = cli::run_here(std::regex_replace(simgrid, std::regex("\"data\": 8"), "\"data\": 3"), false);
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->status, 400);
}

// Past the workers and the queue, a job is refused at once and nothing of it is kept.
TEST(ServePool, ABoundedQueueRefusesWhatDoesNotFit) {
  std::mutex m;
  std::condition_variable cv;
  bool go = false;
  std::promise<void> started;
  std::atomic<int> ran{0};
  {
    cli::Pool pool(1, 1);
    ASSERT_TRUE(pool.submit([&] {
      started.set_value();
      std::unique_lock lock(m);
      cv.wait(lock, [&] { return go; });
      ++ran;
    }));
    started.get_future().wait();  // the worker is busy
    EXPECT_TRUE(pool.submit([&] { ++ran; }));   // waits in the queue
    EXPECT_FALSE(pool.submit([&] { ++ran; }));  // past the queue
    cli::ServeOptions o;
    const auto refused = cli::run_simulation(o, pool, gpt2(R"({"data": 8})"), false);
    EXPECT_EQ(refused.status, 503);
    EXPECT_EQ(refused.body, "error: 1 simulations are running and 1 waiting; try again\n");
    {
      std::lock_guard lock(m);
      go = true;
    }
    cv.notify_all();
  }  // the pool runs what it queued, then ends
  EXPECT_EQ(ran.load(), 2);
}

TEST(ServePool, SixteenRequestsAtOnceAreEachAnsweredTheirOwn) {
  Server server;
  ASSERT_GT(server.port(), 0);
  std::vector<std::string> bodies;
  for (int d : {1, 2, 4, 8})
    for (const char* schedule : {"gpipe", "1f1b"}) {
      bodies.push_back(gpt2(R"({"data": )" + std::to_string(d) + R"(, "pipeline": )" + std::to_string(8 / d) +
                            R"(, "micro_batch_size": 2, "pipeline_schedule": ")" + schedule + "\"}"));
      bodies.push_back(gpt2(R"({"data": )" + std::to_string(d) + R"(, "pipeline": 3})"));  // bad: 3d of 8 GPUs
    }
  std::vector<std::future<Reply>> replies;
  for (const auto& b : bodies)
    replies.push_back(std::async(std::launch::async, [&server, &b] { return request(server.port(), "POST", "/api/run", b); }));
  for (std::size_t i = 0; i < bodies.size(); ++i) {
    const Reply r = replies[i].get();
    const auto alone = cli::run_here(bodies[i], false);
    ASSERT_TRUE(alone.has_value());
    EXPECT_EQ(r.status, alone->status) << bodies[i] << "\n" << r.body;
    EXPECT_EQ(without_wall_time(r.body), without_wall_time(alone->body)) << bodies[i];
  }
  EXPECT_EQ(request(server.port(), "POST", "/api/run", bodies[0]).status, 200);  // still serving
}

// With no queue, sixteen slow requests at once: the two cores' worth run, the rest get a 503
// that says why, and the server answers the next request.
TEST(ServePool, PastThePoolAClientGetsAPolite503) {
  Server server({"--queue", "0"});
  const std::string slow = R"({"extends": "hybrid/gpt3-175b-1024-a100", "simulation": {"backend": "analytical"}})";
  std::vector<std::future<Reply>> replies;
  for (int i = 0; i < 16; ++i)
    replies.push_back(std::async(std::launch::async, [&] { return request(server.port(), "POST", "/api/run", slow); }));
  int ok = 0, refused = 0;
  for (auto& f : replies) {
    const Reply r = f.get();
    ok += r.status == 200;
    EXPECT_TRUE(r.status == 200 || r.status == 503) << r.status << " " << r.body;
    if (r.status == 503) {
      ++refused;
      EXPECT_NE(r.body.find("simulations are running and 0 waiting; try again"), std::string::npos) << r.body;
    }
  }
  EXPECT_EQ(ok + refused, 16);
  EXPECT_GE(ok, 1);
  EXPECT_GE(refused, 1);
  EXPECT_EQ(request(server.port(), "POST", "/api/run", gpt2(R"({"data": 8})")).status, 200);
}

// A thread cannot be killed as a child can: past --time-limit the client gets the child's 504,
// the simulation ends on its worker unseen, and the other worker answers meanwhile. The slow run
// replays 12 steps of 16,384 GPUs (3.1 M tasks), each its own draw: about 3 s of CPU in a Release build
// (4 steps took 0.93 s, under the 1 s limit, once the planner got faster).
TEST(ServePool, PastTheTimeLimitTheClientGets504AndTheServerServesOn) {
  Server server({"--time-limit", "1"});
  const std::string slow = R"({"extends": "gpt2-dp1024-a100", "cluster": {"nodes": 2048}, "parallelism": {"data": 16384},
    "training": {"global_batch_size": 262144}, "simulation": {"backend": "analytical", "steps": 12},
    "stragglers": {"seed": 7, "jitter": {"distribution": "lognormal", "sigma": 0.05}}})";
  const Reply r = request(server.port(), "POST", "/api/run", slow);
  EXPECT_EQ(r.status, 504) << r.body.substr(0, 300);
  EXPECT_EQ(r.body, "error: the simulation ran past the server's time limit (1.000000 s)\n");
  EXPECT_EQ(request(server.port(), "POST", "/api/run", gpt2(R"({"data": 8})")).status, 200);
}
