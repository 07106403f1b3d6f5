// Issue 16 item 5: `dtsim serve` on an ephemeral port: the API against `dtsim run --format json`
// byte for byte, bad and oversized requests, and the page.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "helpers.hpp"
#include "serve_helpers.hpp"

using namespace dtsim;
using namespace dtsim::test::serve;

namespace {

const std::string kScenario = R"({
  "schema_version": 1, "name": "serve-test",
  "model": {"preset": "gpt2"},
  "hardware": {"device": "a100-sxm-80gb"},
  "cluster": {"preset": "dgx-a100", "nodes": 1},
  "parallelism": {"data": 2, "pipeline": 4, "micro_batch_size": 2, "pipeline_schedule": "gpipe"},
  "training": {"global_batch_size": 32, "steps": 1000},
  "simulation": {"backend": "analytical"}
})";

}  // namespace

TEST(Serve, ApiAnswersWhatRunPrintsByteForByte) {
  Server server;
  ASSERT_GT(server.port(), 0);
  const auto r = request(server.port(), "POST", "/api/run", kScenario);
  ASSERT_EQ(r.status, 200) << r.head << r.body;
  EXPECT_NE(r.head.find("application/json"), std::string::npos) << r.head;
  test::TempDir dir;
  dir.file("scenario.json", kScenario);
  const auto cli = run_cli(dir.path());
  ASSERT_EQ(cli.code, 0) << cli.err;
  EXPECT_NE(r.body.find("\"provenance\""), std::string::npos);
  EXPECT_EQ(without_provenance(r.body), without_provenance(cli.out));
  EXPECT_NE(r.body.find("\"pipeline_bubble\""), std::string::npos);
}

TEST(Serve, BadInputIs400WithTheCliErrorText) {
  Server server;
  for (const std::string& bad : {std::string(R"({"schema_version": 1, "name": )"),
                                std::string(kScenario).replace(kScenario.find("\"data\": 2"), 9, "\"data\": 3")}) {
    const auto r = request(server.port(), "POST", "/api/run", bad);
    EXPECT_EQ(r.status, 400) << r.body;
    test::TempDir dir;
    dir.file("scenario.json", bad);
    const auto cli = run_cli(dir.path());
    EXPECT_EQ(cli.code, 2);
    EXPECT_EQ(r.body, cli.err);
    EXPECT_EQ(r.body.rfind("error: scenario.json", 0), 0u) << r.body;
  }
}

TEST(Serve, OversizedIs413AndUnknownIs404) {
  Server server;
  const auto r = request(server.port(), "POST", "/api/run", std::string(2 << 20, ' '));
  EXPECT_EQ(r.status, 413) << r.body;
  EXPECT_NE(r.body.find("larger than the server's limit of 1048576 bytes"), std::string::npos) << r.body;
  EXPECT_EQ(request(server.port(), "GET", "/etc/passwd").status, 404);
  EXPECT_EQ(request(server.port(), "GET", "/api/run").status, 405);
}

TEST(Serve, PageIsSelfContained) {
  Server server;
  const auto r = request(server.port(), "GET", "/");
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.head.find("text/html"), std::string::npos);
  EXPECT_NE(r.body.find("post(\"/api/run\""), std::string::npos);
  for (const char* control : {"name=\"schedule\"", "name=\"zero\"", "name=\"recompute\"", "name=\"algorithm\"",
                              "name=\"tensor\"", "name=\"pipeline\"", "name=\"sigma\""})
    EXPECT_NE(r.body.find(control), std::string::npos) << control;
  // Nothing fetched from elsewhere: no external scripts, styles or fonts.
  EXPECT_EQ(r.body.find("http://"), std::string::npos);
  EXPECT_EQ(r.body.find("https://"), std::string::npos);
  EXPECT_EQ(r.body.find("src="), std::string::npos);
}

// Issue 31 item 3: every control of the free explorer says what its term means, on hover.
TEST(Serve, EveryExplorerControlExplainsItsTerm) {
  Server server;
  const auto r = request(server.port(), "GET", "/");
  ASSERT_EQ(r.status, 200);
  int rows = 0;
  for (auto at = r.body.find("<div class=\"row\"><label"); at != std::string::npos; at = r.body.find("<div class=\"row\"><label", at + 1)) {
    const std::string label = r.body.substr(at, r.body.find("</label>", at) - at);
    if (label.find(">zoom") != std::string::npos) continue;  // a view setting, not a term
    ++rows;
    EXPECT_NE(label.find("<label title=\""), std::string::npos) << label;
  }
  EXPECT_GE(rows, 15);
}

// Issue 16 item 5 follow-up: the strategies added since the page was written (issues 14 and 17).

namespace {

// The text between `<select name="NAME"` and its `</select>` on the page, "" when it has none.
std::string select_of(const std::string& page, const std::string& name) {
  const auto at = page.find("<select name=\"" + name + "\"");
  if (at == std::string::npos) return "";
  return page.substr(at, page.find("</select>", at) - at);
}

// A one-step analytical scenario from its parts, each a JSON text.
std::string scenario_with(const std::string& model, const std::string& device, const std::string& cluster,
                          const std::string& parallelism, const std::string& training) {
  return R"({"schema_version": 1, "name": "serve-controls", "model": {"preset": ")" + model +
         R"("}, "hardware": {"device": ")" + device + R"("}, "cluster": )" + cluster + R"(, "parallelism": )" +
         parallelism + R"(, "training": )" + training + R"(, "simulation": {"backend": "analytical"}})";
}

}  // namespace

// What we show must add up: the page draws every part of the step a result carries (the parts
// sum to the step), those it knows by name and colour and, after them, any it does not.
TEST(Serve, PageDrawsEveryPartOfTheStep) {
  Server server;
  const auto r = request(server.port(), "GET", "/");
  ASSERT_EQ(r.status, 200);
  for (const char* part : {"compute", "exposed_communication", "pipeline_bubble", "stage_imbalance", "optimizer",
                           "straggler_wait", "input_stall", "checkpoint", "comm_interference"}) {
    EXPECT_NE(r.body.find(std::string("\"") + part + "\""), std::string::npos) << part;
    EXPECT_NE(r.body.find(std::string(".") + part + "{background:"), std::string::npos) << part;
  }
  EXPECT_NE(r.body.find("Object.keys(b).filter(n=>n!==\"worst_rank\"&&!parts.includes(n))"), std::string::npos);
}

TEST(Serve, PageOffersTheNewStrategies) {
  Server server;
  const auto r = request(server.port(), "GET", "/");
  ASSERT_EQ(r.status, 200);
  const std::string& page = r.body;
  for (const char* s : {"gpipe", "1f1b", "interleaved-1f1b", "pipedream", "pipedream-2bw", "zero-bubble-h1"})
    EXPECT_NE(select_of(page, "schedule").find(std::string(">") + s + "<"), std::string::npos) << s;
  for (const char* f : {"megatron-lm", "deepspeed", "fsdp"})
    EXPECT_NE(select_of(page, "framework").find(std::string(">") + f + "<"), std::string::npos) << f;
  EXPECT_NE(select_of(page, "precision").find("value=\"fp8\""), std::string::npos);
  EXPECT_NE(select_of(page, "precision").find(">bf16<"), std::string::npos);
  for (const char* m : {"mixtral-8x7b", "qwen3-30b-a3b", "gpt-oss-120b", "deepseek-v3"})
    EXPECT_NE(select_of(page, "model").find(std::string(">") + m + "<"), std::string::npos) << m;
  for (const char* d : {"\"b200|dgx-b200|8|fp8\"", "\"gb200|nvl72|72|fp8\"", "\"h100-sxm-80gb|dgx-h100|8|fp8\""})
    EXPECT_NE(select_of(page, "device").find(d), std::string::npos) << d;
  EXPECT_NE(page.find("<input type=\"number\" name=\"expert\""), std::string::npos);
  EXPECT_NE(page.find("<input type=\"number\" name=\"context\""), std::string::npos);
  // The scenario the page sends carries them, and the page shows the all-to-all share it gets back.
  for (const char* js : {"par.expert=ep", "par.context=cp", "framework:field(p,\"framework\").value",
                         "precision:field(p,\"precision\").value", "j.parallelism.all_to_all_share"})
    EXPECT_NE(page.find(js), std::string::npos) << js;
  // A refused combination shows the server's error text, not the last result beside it.
  EXPECT_NE(page.find("field(p,\"error\").textContent=body;field(p,\"step\").textContent=\"no result\""), std::string::npos);
}

TEST(Serve, NewStrategiesAnswerWhatRunPrints) {
  Server server;
  ASSERT_GT(server.port(), 0);
  const std::string one_node = R"({"preset": "dgx-h100", "nodes": 1})";
  const std::string bf16 = R"({"global_batch_size": 16, "precision": "bf16", "attention": "flash"})";
  const std::string fp8 = R"({"global_batch_size": 16, "precision": "fp8", "attention": "flash"})";
  struct Case {
    std::string scenario, expect;  // expect: a key the result must carry
  } cases[] = {
      {scenario_with("mixtral-8x7b", "h100-sxm-80gb", R"({"preset": "dgx-h100", "nodes": 2})",
                     R"({"data": 4, "tensor": 2, "pipeline": 2, "expert": 4, "framework": "megatron-lm"})", bf16),
       "\"all_to_all_share\""},
      {scenario_with("gpt2", "h100-sxm-80gb", one_node,
                     R"({"data": 1, "tensor": 2, "pipeline": 2, "context": 2, "sequence_parallel": true})", fp8),
       "\"context_comm\""},
      {scenario_with("gpt2", "b200", R"({"preset": "dgx-b200", "nodes": 1})",
                     R"({"data": 2, "pipeline": 4, "pipeline_schedule": "zero-bubble-h1", "framework": "deepspeed"})", fp8),
       "\"expected_bubble_fraction\""},
      {scenario_with("gpt2", "h100-sxm-80gb", one_node,
                     R"({"data": 2, "pipeline": 4, "pipeline_schedule": "pipedream-2bw"})", bf16),
       "\"weight_versions\""},
      {scenario_with("gpt2", "h100-sxm-80gb", one_node, R"({"data": 8, "framework": "fsdp", "zero_stage": 3})", bf16),
       "\"zero3\""},
  };
  for (const auto& c : cases) {
    const auto r = request(server.port(), "POST", "/api/run", c.scenario);
    EXPECT_EQ(r.status, 200) << c.scenario << "\n" << r.body;
    test::TempDir dir;
    dir.file("scenario.json", c.scenario);
    const auto cli = run_cli(dir.path());
    ASSERT_EQ(cli.code, 0) << c.scenario << "\n" << cli.err;
    EXPECT_EQ(without_provenance(r.body), without_provenance(cli.out)) << c.scenario;
    EXPECT_NE(r.body.find(c.expect), std::string::npos) << c.expect << " in " << r.body;
  }
}

TEST(Serve, RefusedNewCombinationsAre400WithTheCliErrorText) {
  Server server;
  const std::string bf16 = R"({"global_batch_size": 16, "precision": "bf16", "attention": "flash"})";
  const std::pair<std::string, std::string> bad[] = {
      {scenario_with("gpt2", "a100-sxm-80gb", R"({"preset": "dgx-a100", "nodes": 1})", R"({"data": 8})",
                     R"({"global_batch_size": 16, "precision": "fp8", "attention": "flash"})"),
       "/training/precision: device a100-sxm-80gb has no fp8 peak"},
      {scenario_with("mixtral-8x7b", "h100-sxm-80gb", R"({"preset": "dgx-h100", "nodes": 2})",
                     R"({"data": 4, "tensor": 2, "pipeline": 2, "expert": 4, "pipeline_schedule": "zero-bubble-h1"})", bf16),
       "/parallelism/pipeline_schedule: this pipeline schedule with expert parallelism is not modelled"},
      {scenario_with("gpt2", "h100-sxm-80gb", R"({"preset": "dgx-h100", "nodes": 1})",
                     R"({"data": 8, "framework": "horovod"})", bf16),
       "/parallelism/framework"},
  };
  for (const auto& [scenario, why] : bad) {
    const auto r = request(server.port(), "POST", "/api/run", scenario);
    EXPECT_EQ(r.status, 400) << r.body;
    test::TempDir dir;
    dir.file("scenario.json", scenario);
    const auto cli = run_cli(dir.path());
    EXPECT_EQ(cli.code, 2);
    EXPECT_EQ(r.body, cli.err);
    EXPECT_NE(r.body.find("error: scenario.json:" + why), std::string::npos) << r.body;
  }
}

// Issue 31 item 3: POST /api/timeline answers report.html's timeline of the same scenario (its
// legend, sampling note and picture), within the same limits as /api/run.
TEST(Serve, TimelineIsTheReportsPicture) {
  Server server;
  const auto r = request(server.port(), "POST", "/api/timeline", kScenario);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.head.find("text/html"), std::string::npos) << r.head;
  EXPECT_EQ(r.body.rfind("<!-- dtsim:timeline -->", 0), 0u) << r.body.substr(0, 200);
  EXPECT_NE(r.body.find("<svg"), std::string::npos);
  EXPECT_NE(r.body.find("pipeline bubble"), std::string::npos);  // the legend, idle causes included
  // One row per simulated GPU: data rank 0 of each of the 4 stages, 2 GPUs apart (tp-dp-pp).
  for (const char* gpu : {"GPU 0", "GPU 2", "GPU 4", "GPU 6"}) EXPECT_NE(r.body.find(gpu), std::string::npos) << gpu;
  EXPECT_EQ(r.body.find("<h2>"), std::string::npos);             // the picture only, not the report around it
  EXPECT_EQ(request(server.port(), "GET", "/api/timeline").status, 405);
  const auto bad = request(server.port(), "POST", "/api/timeline", R"({"schema_version": 1, "name": )");
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_EQ(bad.body.rfind("error: scenario.json", 0), 0u) << bad.body;
}
