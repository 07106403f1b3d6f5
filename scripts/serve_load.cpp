// A load generator for `dtsim serve` (scripts/bench.sh): CLIENTS threads, each POSTing BODY_FILE
// to /api/run over a fresh connection (the server closes each, as the explorer page sees it),
// waiting for the whole answer, then sending the next, for SECONDS. Prints the answers per second
// and how many were not 200. Plain sockets: what is timed is the server, not an HTTP library.
//   g++ -O2 -std=c++20 -pthread scripts/serve_load.cpp -o serve_load
//   serve_load PORT CLIENTS SECONDS BODY_FILE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

// One request; its HTTP status, 0 when the connection failed.
int post(int port, const std::string& request) {
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(s);
    return 0;
  }
  for (std::size_t sent = 0; sent < request.size();) {
    const auto n = send(s, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<std::size_t>(n);
  }
  std::string head;
  char buf[65536];
  for (ssize_t n; (n = recv(s, buf, sizeof buf, 0)) > 0;)
    if (head.size() < 16) head.append(buf, static_cast<std::size_t>(n));
  close(s);
  return head.size() >= 12 ? std::atoi(head.c_str() + 9) : 0;
}

}  // namespace

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
  const std::string request = "POST /api/run HTTP/1.1\r\nHost: localhost:" + std::to_string(port) +
                              "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.str().size()) +
                              "\r\nConnection: close\r\n\r\n" + body.str();
  std::atomic<long> ok{0}, other{0};
  const auto start = std::chrono::steady_clock::now();
  const auto end = start + std::chrono::duration<double>(seconds);
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&] {
      while (std::chrono::steady_clock::now() < end) (post(port, request) == 200 ? ok : other)++;
    });
  for (auto& t : threads) t.join();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%ld %.1f %ld %.3f\n", ok.load(), static_cast<double>(ok.load()) / wall, other.load(), wall);
  return 0;
}
