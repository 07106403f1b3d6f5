#pragma once
// The part of `dtsim serve` that turns one request into one answer, without sockets, so that it can
// be tested and fuzzed alone (tests/fuzz/serve_fuzzer.cpp).
#include <functional>
#include <string>

#include "sim/cli/serve.hpp"

namespace dtsim::cli::api {

struct Request {
  std::string method, target, host, origin, body;
  bool has_host = false, has_origin = false;
};

struct Answer {
  int status = 200;
  std::string body, type = "application/json";
};

Answer text(int status, std::string body);

// Runs a scenario text that handle() has checked, as `dtsim run scenario.json --format json` would;
// with `report` true, as `... --html` would, answering report.html.
using Runner = std::function<Answer(const std::string& scenario, bool report)>;

// Limits on a request's scenario, checked on its bytes before anything parses it: deeper nesting
// or more keys cost the parser (and the server) memory or CPU far beyond what the bytes suggest.
inline constexpr std::size_t kMaxRequestKeys = 4096;

// The answer to one request. `port` is the one the server listens on: a Host or Origin naming
// another (a page elsewhere, a DNS rebinding) is refused. Never throws.
Answer handle(const ServeOptions& o, unsigned short port, const Request& r, const Runner& run);

// The shipped scenario a request's "extends" names (its path under scenarios/, with or without
// ".json", as `dtsim list scenarios` shows it): its absolute path, or "" when there is none.
std::string shipped_scenario(const std::string& name);

}  // namespace dtsim::cli::api
