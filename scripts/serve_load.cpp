// A load generator for `dtsim serve` (scripts/bench.sh): CLIENTS threads, each POSTing BODY_FILE
// to /api/run over a fresh connection (the server closes each, as the explorer page sees it),
// waiting for the whole answer, then sending the next, for SECONDS. Prints the answers per second
// and how many were not 200. Plain sockets: what is timed is the server, not an HTTP library.
//   g++ -O2 -std=c++20 -pthread -I. scripts/serve_load.cpp -o serve_load
//   serve_load PORT CLIENTS SECONDS BODY_FILE
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/http_client.hpp"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: serve_load PORT CLIENTS SECONDS BODY_FILE\n");
    return 2;
  }
  const int port = std::atoi(argv[1]), clients = std::atoi(argv[2]);
  const double seconds = std::atof(argv[3]);
  std::ifstream in(argv[4], std::ios::binary);
  std::stringstream body;
  body << in.rdbuf();
  const std::string request = body.str();
  std::atomic<long> ok{0}, other{0};
  const auto start = std::chrono::steady_clock::now();
  const auto end = start + std::chrono::duration<double>(seconds);
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&] {
      while (std::chrono::steady_clock::now() < end)
        (dtsim::test::serve::request(port, "POST", "/api/run", request).status == 200 ? ok : other)++;
    });
  for (auto& t : threads) t.join();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%ld %.1f %ld %.3f\n", ok.load(), static_cast<double>(ok.load()) / wall, other.load(), wall);
  return 0;
}
