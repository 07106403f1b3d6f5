#pragma once
#include <cstddef>
#include <string>

namespace dtsim::cli {

struct ServeOptions {
  int port = 8080;              // 0: any free port (printed)
  std::string bind = "127.0.0.1";
  int jobs = 2;                 // SimGrid simulations (children) at once; more get 503
  // Analytical simulations run in process, one per core at once; this many more may wait for a
  // core, and more than that get 503.
  int queue = 64;
  double time_limit_s = 120;    // per simulation; past it the child is killed and the answer is 504
  std::size_t max_body = 1 << 20;  // bytes of scenario JSON; more get 413
  int client_timeout_s = 30;    // to send a whole request, and to read the answer
  int max_connections = 64;     // open at once; more get 503
};

// `dtsim serve`: the explorer page at / and POST /api/run (a scenario JSON in, what
// `dtsim run --format json` prints for it out). Runs until SIGINT or SIGTERM, which end it with
// 128 + the signal once every running simulation is killed and cleaned up.
int serve(const ServeOptions& o);

// The explorer page: one self-contained HTML file (no CDN, no downloads).
const char* serve_page();

}  // namespace dtsim::cli
