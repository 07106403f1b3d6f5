// Issue 31 item 1: the explorer's lessons (reports/lessons/*.json). Each lesson's A and B run
// through the server's API and differ as its text claims, each thing it offers to try moves the
// figure the way it says, and a broken lesson file is refused naming its file and pointer.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "serve_helpers.hpp"
#include "sim/cli/serve_lessons.hpp"
#include "sim/core/errors.hpp"

using namespace dtsim;
using namespace dtsim::test::serve;
using nlohmann::json;

namespace {

// The lesson's figure for one side's scenario, run by the server as the page runs it.
double figure_of(int port, const json& lesson, const json& scenario) {
  const auto r = request(port, "POST", "/api/run", scenario.dump());
  EXPECT_EQ(r.status, 200) << lesson["name"] << "\n" << scenario.dump() << "\n" << r.body;
  if (r.status != 200) return NAN;
  const json result = json::parse(r.body);
  const json::json_pointer at(lesson["figure"]["at"].get<std::string>());
  EXPECT_TRUE(result.contains(at)) << lesson["name"] << ": the result has no " << at.to_string();
  return result.contains(at) ? result[at].get<double>() : NAN;
}

// Which side has the better figure, or "same" within `within` of the larger.
std::string better(const json& lesson, double a, double b, double within) {
  if (std::abs(a - b) <= within * std::max(std::abs(a), std::abs(b))) return "same";
  const bool lower = lesson["figure"]["better"] == "lower";
  return (a < b) == lower ? "A" : "B";
}

json lessons_from(int port) {
  const auto r = request(port, "GET", "/api/lessons");
  EXPECT_EQ(r.status, 200) << r.body;
  return r.status == 200 ? json::parse(r.body) : json::array();
}

}  // namespace

TEST(ServeLessons, EveryLecturesLessonIsServedInOrder) {
  Server server;
  const json lessons = lessons_from(server.port());
  ASSERT_GE(lessons.size(), 12u);
  for (const char* name : {"all-reduce-vs-parameter-server", "all-reduce-algorithms", "pipeline-bubble", "zero-and-offload",
                           "tensor-pipeline-data", "stragglers-backup-workers", "sync-vs-async", "failures-checkpoints",
                           "input-stalls", "cnn-gpus-vs-tpu-pods", "hand-placement", "channel-split"}) {
    bool found = false;
    for (const auto& l : lessons) found = found || l["name"] == name;
    EXPECT_TRUE(found) << name;
  }
  for (std::size_t i = 1; i < lessons.size(); ++i) EXPECT_LE(lessons[i - 1]["order"], lessons[i]["order"]);
  EXPECT_EQ(request(server.port(), "POST", "/api/lessons", "{}").status, 405);
  EXPECT_EQ(request(server.port(), "GET", "/api/lessons/../../etc/passwd").status, 404);
}

// What each lesson says A against B shows, it shows; and each try moves the figure as it says.
TEST(ServeLessons, EachLessonShowsWhatItsTextClaims) {
  Server server;
  for (const json& lesson : lessons_from(server.port())) {
    SCOPED_TRACE(lesson["name"].get<std::string>());
    json values_a = lesson["A"]["values"], values_b = lesson["B"]["values"];
    double a = figure_of(server.port(), lesson, cli::lessons::side_scenario(lesson, "A"));
    double b = figure_of(server.port(), lesson, cli::lessons::side_scenario(lesson, "B"));
    const json& expect = lesson["expect"];
    if (expect.contains("same_within")) {
      EXPECT_EQ(better(lesson, a, b, expect["same_within"]), "same") << a << " " << b;
    } else {
      EXPECT_EQ(better(lesson, a, b, 0.05), expect["better"]) << a << " " << b;
      EXPECT_GE(std::max(a, b) / std::min(a, b), expect["by_at_least"].get<double>()) << a << " " << b;
    }
    for (const json& t : lesson["tries"]) {
      SCOPED_TRACE(t["says"].get<std::string>());
      const std::string side = t["side"];
      if (side != "B") values_a[t["control"].get<std::string>()] = t["value"];
      if (side != "A") values_b[t["control"].get<std::string>()] = t["value"];
      const double a2 = side == "B" ? a : figure_of(server.port(), lesson, cli::lessons::side_scenario(lesson, "A", values_a));
      const double b2 = side == "A" ? b : figure_of(server.port(), lesson, cli::lessons::side_scenario(lesson, "B", values_b));
      if (t.contains("then_better")) {
        EXPECT_EQ(better(lesson, a2, b2, 0.0), t["then_better"]) << a2 << " " << b2;
      } else {
        const double before = side == "A" ? a : b, after = side == "A" ? a2 : b2;
        const std::string moved = std::abs(after - before) <= 0.05 * std::abs(before) ? "same" : after > before ? "up" : "down";
        EXPECT_EQ(moved, t["moves"]) << before << " -> " << after;
      }
      a = a2;
      b = b2;
    }
  }
}

TEST(ServeLessons, ABrokenLessonNamesItsFileAndPointer) {
  const json good = json::parse(R"({"order": 1, "title": "t", "lecture": "l", "text": "x", "question": "q",
    "figure": {"at": "/step_time_s", "label": "step time", "unit": "s", "better": "lower"},
    "base": {"extends": "gpt2-dp8-a100"},
    "controls": [{"id": "algo", "label": "all-reduce", "at": "/parallelism/all_reduce_algorithm", "options": ["ring", "tree"]}],
    "A": {"label": "ring", "values": {"algo": "ring"}}, "B": {"label": "tree", "values": {"algo": "tree"}},
    "expect": {"better": "B", "by_at_least": 1.1},
    "tries": [{"side": "A", "control": "algo", "value": "tree", "moves": "down", "says": "s"}]})");
  EXPECT_EQ(cli::lessons::check(good, "ok", "ok.json")["name"], "ok");
  EXPECT_EQ(cli::lessons::side_scenario(cli::lessons::check(good, "ok", "ok.json"), "B")["parallelism"]["all_reduce_algorithm"], "tree");
  const std::pair<std::string, std::string> bad[] = {
      {R"({"op": "replace", "path": "/A/values/algo", "value": "rign"})", "/A/values/algo: \"rign\" is not one of its options (did you mean \"ring\"?)"},
      {R"({"op": "add", "path": "/figure/bettter", "value": "lower"})", "/figure/bettter: unknown key (did you mean \"better\"?)"},
      {R"({"op": "remove", "path": "/B/values/algo"})", "/B/values: no value for the control \"algo\""},
      {R"({"op": "replace", "path": "/base/extends", "value": "/etc/passwd"})", "/base/extends: not one of the project's scenarios"},
      {R"({"op": "replace", "path": "/tries/0/control", "value": "algorithm"})", "/tries/0/control: no control \"algorithm\""},
  };
  for (const auto& [patch, why] : bad) {
    try {
      cli::lessons::check(good.patch(json::array({json::parse(patch)})), "bad", "bad.json");
      ADD_FAILURE() << "accepted: " << patch;
    } catch (const InputError& e) {
      EXPECT_EQ(e.file(), "bad.json");
      EXPECT_NE((e.pointer() + ": " + e.reason()).find(why), std::string::npos) << e.what();
    }
  }
}
