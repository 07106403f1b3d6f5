#include "sim/cli/serve_api.hpp"

#include <fmt/format.h>

#include <boost/asio/ip/address.hpp>
#include <exception>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <variant>

#include "reports/html_marks.hpp"
#include "sim/cli/serve_lessons.hpp"
#include "sim/core/json_reader.hpp"
#include "sim/core/paths.hpp"

namespace dtsim::cli::api {

namespace fs = std::filesystem;

Answer text(int status, std::string body) { return {status, std::move(body), "text/plain; charset=utf-8"}; }

namespace {

Answer refuse(int status, const std::string& pointer, const std::string& reason) {
  return text(status, fmt::format("error: scenario.json:{}: {}\n", pointer, reason));
}

// Nesting depth and key count from the bytes alone (strings skipped), so that a body nested
// 170,000 deep or holding 85,000 keys is refused before a parser builds anything from it.
std::optional<Answer> gate(const std::string& body) {
  std::size_t depth = 0, keys = 0;
  bool in_string = false, escaped = false;
  for (std::size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if ((c == '{' || c == '[') && ++depth > kMaxJsonDepth)
      return refuse(400, "", fmt::format("nested deeper than {} levels (at byte {})", kMaxJsonDepth, i));
    else if ((c == '}' || c == ']') && depth > 0) --depth;
    else if (c == ':' && ++keys > kMaxRequestKeys)
      return refuse(400, "", fmt::format("more than {} keys (at byte {}): the server takes no larger scenario",
                                         kMaxRequestKeys, i));
  }
  return std::nullopt;
}

// Shipped scenarios by the names a request may give: "gpt2-dp8-a100", "cnn/resnet50-1xv100.json".
// Regular files only (a link could lead anywhere); read once.
const std::map<std::string, std::string>& shipped() {
  static const std::map<std::string, std::string> names = [] {
    std::map<std::string, std::string> m;
    std::error_code ec;
    const fs::path root = fs::absolute(fs::path(data_dir()) / "scenarios", ec);  // the child runs elsewhere
    for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      if (!it->is_regular_file(ec) || it->is_symlink(ec) || it->path().extension() != ".json") continue;
      const std::string rel = fs::relative(it->path(), root, ec).string();
      m[rel] = it->path().string();
      m[rel.substr(0, rel.size() - 5)] = it->path().string();
    }
    return m;
  }();
  return names;
}

// The "name" a shipped scenario sets, else the name the request gave it.
std::string base_name(const std::string& file, const std::string& fallback) {
  try {
    const Json base = parse_json_file(file);
    if (base.is_object() && base.contains("name") && base["name"].is_string()) return base["name"].get<std::string>();
  } catch (const std::exception&) {
  }
  return fallback;
}

bool loopback_name(const std::string& name, const std::string& bind) {
  if (name == "localhost" || name == "[::1]") return true;
  if (name == bind || "[" + bind + "]" == name) return true;
  boost::system::error_code ec;
  const auto a = boost::asio::ip::make_address(name, ec);
  return !ec && a.is_loopback();
}

// "name:port" (or "[v6]:port") naming this server: a loopback name, or the address it is bound to,
// and the port it listens on.
bool our_host(const std::string& host, const ServeOptions& o, unsigned short port) {
  const auto colon = host.rfind(':');
  const bool has_port = colon != std::string::npos && host.find(']', colon) == std::string::npos;
  const std::string name = has_port ? host.substr(0, colon) : host;
  const std::string want = std::to_string(port);
  if (has_port ? host.substr(colon + 1) != want : port != 80) return false;
  return loopback_name(name, o.bind);
}

// Checks that the request is meant for this server (Host) and, for a browser, sent by its own page
// (Origin): another site's page in the user's browser may not run anything here.
std::optional<Answer> check_sender(const ServeOptions& o, unsigned short port, const Request& r) {
  if (!r.has_host || !our_host(r.host, o, port))
    return text(403, fmt::format("error: the Host header must name this server (localhost:{})\n", port));
  if (r.has_origin && !(r.origin.rfind("http://", 0) == 0 && our_host(r.origin.substr(7), o, port)))
    return text(403, "error: requests from other sites' pages are refused (Origin is not this server)\n");
  return std::nullopt;
}

// The scenario the child reads: "extends" replaced by the shipped file it names, and the
// analytical backend (milliseconds, not the replay's seconds) where it names none. Malformed JSON
// goes to the child untouched, so its error (line and column) is the command line's.
std::variant<std::string, Answer> prepare(const std::string& body) {
  auto j = nlohmann::ordered_json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return body;
  bool changed = false;
  if (j.contains("extends")) {
    const auto& ext = j["extends"];
    const std::string name = ext.is_string() ? ext.get<std::string>() : "";
    const std::string file = shipped_scenario(name);
    if (file.empty())
      return refuse(400, "/extends",
                    "a request may only extend one of the project's scenarios, by the name `dtsim list scenarios` "
                    "shows (\"gpt2-dp8-a100\"), never a file");
    j["extends"] = file;
    // The command line would name a variant after its file, "scenario" here: the request's
    // results are its own, so it keeps its base's name as before.
    if (!j.contains("name")) j["name"] = base_name(file, name);
    changed = true;
  }
  // A device or preset may be named, never given as a file: a request reads no file of its own.
  for (const char* at : {"/hardware/device", "/model/preset", "/cluster/preset"}) {
    const auto pointer = nlohmann::ordered_json::json_pointer(at);
    if (j.contains(pointer) && j[pointer].is_string() && names_a_file(j[pointer].get<std::string>()))
      return refuse(400, at, "a request names devices and presets as `dtsim list` shows them, never by a file's path");
  }
  const bool has_sim = j.contains("simulation");
  if (!has_sim || (j["simulation"].is_object() && !j["simulation"].contains("backend"))) {
    j["simulation"]["backend"] = "analytical";
    changed = true;
  }
  return changed ? j.dump(2) : body;
}

// report.html's timeline (its legend, note and picture), as POST /api/timeline answers it.
Answer timeline_of(Answer report) {
  if (report.status != 200) return report;
  const auto begin = report.body.find(reports::kTimelineBegin), end = report.body.find(reports::kTimelineEnd);
  if (begin == std::string::npos || end == std::string::npos || end < begin)
    return text(500, "error: this run's report has no timeline\n");
  return {200, report.body.substr(begin, end + std::string(reports::kTimelineEnd).size() - begin), report.type};
}

// A simulation: its result (/api/run) or its timeline (/api/timeline); the runner keeps the
// server's limits (simulations at once, time).
Answer run_api(const Request& r, const Runner& run, bool timeline) {
  if (r.method != "POST") return text(405, "POST a scenario JSON\n");
  if (auto refused = gate(r.body)) return *refused;
  auto prepared = prepare(r.body);
  if (auto* a = std::get_if<Answer>(&prepared)) return *a;
  const std::string& scenario = std::get<std::string>(prepared);
  return timeline ? timeline_of(run(scenario, true)) : run(scenario, false);
}

}  // namespace

std::string shipped_scenario(const std::string& name) {
  const auto& m = shipped();
  const auto it = m.find(name);
  return it == m.end() ? "" : it->second;
}

Answer handle(const ServeOptions& o, unsigned short port, const Request& r, const Runner& run) {
  try {
    if (auto refused = check_sender(o, port, r)) return *refused;
    std::string target = r.target.substr(0, r.target.find('?'));  // the page reads its query itself
    if (target == "/" || target == "/index.html") {
      if (r.method != "GET" && r.method != "HEAD") return text(405, "GET only\n");
      return {200, serve_page(), "text/html; charset=utf-8"};
    }
    if (target == "/api/run" || target == "/api/timeline") return run_api(r, run, target == "/api/timeline");
    if (target == "/api/lessons") {
      if (r.method != "GET" && r.method != "HEAD") return text(405, "GET only\n");
      return {200, lessons::all()};
    }
    return text(404, "not found: try /, GET /api/lessons, POST /api/run or POST /api/timeline\n");
  } catch (const std::exception& e) {
    return text(500, fmt::format("error: {}\n", e.what()));
  }
}

}  // namespace dtsim::cli::api
