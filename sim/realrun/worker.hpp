#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

// One process of `dtsim realrun`: a worker that trains and exchanges gradients, or the parameter
// server. Started by the realrun command (the hidden `realrun-worker` subcommand) with a listening
// socket it inherits as a file descriptor; prints one JSON object with its timings on stdout.
namespace dtsim::realrun {

struct WorkerOptions {
  std::string role = "worker";  // or "server", or "companion" (steps without end, no network;
                                // prints "wall_s cpu_s" per step)
  std::string algorithm = "ring";  // or "parameter-server"
  int rank = 0, workers = 2;
  int listen_fd = -1;       // ring: this rank's acceptor; server: the server's acceptor
  int peer_port = 0;        // ring: rank + 1's port; parameter-server worker: the server's
  std::string peer_host = "127.0.0.1";
  // A shaped network: the namespace to enter first, and the address and port to listen on
  // (instead of an inherited socket).
  std::string netns, host;
  int listen_port = 0;
  std::vector<std::int64_t> dims;
  std::int64_t batch = 1;
  int warmup = 2, steps = 10;
  unsigned seed = 1;
};

// Runs the process to the end; the JSON it prints: {"rank", "step_s": [...], "allreduce_s": [...],
// "compute_s": [...], "compute_cpu_s": [the process's CPU time meanwhile], "compute_end_s":
// [steady clock when the gradients were ready], "weights": [first weights after the last step]}.
nlohmann::json run_worker(const WorkerOptions& o);

}  // namespace dtsim::realrun
