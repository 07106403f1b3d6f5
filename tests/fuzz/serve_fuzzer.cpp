// libFuzzer target: bytes as one request to `dtsim serve`'s handler, without sockets: a first line
// "METHOD TARGET", header lines "Name: value", an empty line, then the body. A scenario the handler
// lets through is parsed as the child `dtsim run` would first parse it (the loader behind that is
// dtsim_scenario_fuzzer's). Findings: a crash or sanitizer report, an exception the handler did not
// expect (a 500), a status the server never sends, or a scenario passed on whose "extends" leaves
// scenarios/. It links the handler and dtsim_core only, so it builds without the simulator.
// Built by -DDTSIM_FUZZ=ON; run by scripts/fuzz.sh serve.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "reports/html_marks.hpp"
#include "sim/cli/serve_api.hpp"
#include "sim/core/errors.hpp"
#include "sim/core/json_reader.hpp"
#include "sim/core/paths.hpp"

namespace fs = std::filesystem;
using dtsim::cli::api::Answer;

namespace {

constexpr unsigned short kPort = 8080;

dtsim::cli::api::Request parse(const std::string& in) {
  dtsim::cli::api::Request r;
  std::size_t at = in.find('\n');
  const std::string first = in.substr(0, at);
  r.method = first.substr(0, first.find(' '));
  r.target = first.find(' ') == std::string::npos ? "" : first.substr(first.find(' ') + 1);
  while (at != std::string::npos) {
    const std::size_t next = in.find('\n', at + 1);
    const std::string line = in.substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1);
    at = next;
    if (line.empty()) break;
    const auto colon = line.find(": ");
    if (colon == std::string::npos) continue;
    const std::string name = line.substr(0, colon), value = line.substr(colon + 2);
    if (name == "Host") r.host = value, r.has_host = true;
    if (name == "Origin") r.origin = value, r.has_origin = true;
  }
  r.body = at == std::string::npos ? "" : in.substr(at + 1);
  return r;
}

// What the child's parser makes of it; aborts on what the handler should never pass on. A report
// (POST /api/timeline) is an empty timeline between report.html's marks.
Answer run(const std::string& scenario, bool report) {
  const auto j = nlohmann::json::parse(scenario, nullptr, false);
  if (!j.is_discarded() && j.is_object() && j.contains("extends")) {
    const fs::path shipped = fs::path(dtsim::data_dir()) / "scenarios";
    const std::string e = j["extends"].is_string() ? j["extends"].get<std::string>() : "";
    if (e.rfind(shipped.string() + "/", 0) != 0 || e.find("/../") != std::string::npos) {
      std::fprintf(stderr, "extends outside scenarios/ passed on: %s\n", e.c_str());
      std::abort();
    }
  }
  try {
    dtsim::parse_json_text(scenario, "scenario.json");
    if (report) return {200, std::string(dtsim::reports::kTimelineBegin) + dtsim::reports::kTimelineEnd};
    return {200, "{}"};
  } catch (const dtsim::InputError& e) {
    return dtsim::cli::api::text(400, e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "not an input error: %s\n", e.what());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const dtsim::cli::ServeOptions options;
  const auto request = parse(std::string(reinterpret_cast<const char*>(data), size));
  const Answer a = dtsim::cli::api::handle(options, kPort, request,
                                           run);
  switch (a.status) {
    case 200: case 400: case 403: case 404: case 405: case 503: return 0;
    default:
      std::fprintf(stderr, "status %d: %s\n", a.status, a.body.c_str());
      std::abort();
  }
}
