#pragma once
// Raw HTTP/1.1 requests over loopback, one connection each: what the serve tests and
// scripts/serve_load.cpp (the benchmark's load) send to `dtsim serve`. Plain sockets, so what is
// measured or tested is the server, not an HTTP library.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <string>

namespace dtsim::test::serve {

struct Reply {
  int status = 0;
  std::string head, body;
};

inline int connect_to(int port) {
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(s);
    return -1;
  }
  // A safety net for a broken server, not a measured limit: a test never waits forever.
  timeval tv{120, 0};
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return s;
}

// `headers`: the request's own header lines ("Name: value\r\n"); by default a Host naming the server.
inline Reply request(int port, const std::string& method, const std::string& path, const std::string& body = "",
              std::string headers = "") {
  Reply r;
  const int s = connect_to(port);
  if (s < 0) return r;
  if (headers.empty()) headers = "Host: localhost:" + std::to_string(port) + "\r\n";
  std::string req = method + " " + path + " HTTP/1.1\r\n" + headers + "Content-Type: application/json\r\nContent-Length: " +
                    std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
  for (std::size_t sent = 0; sent < req.size();) {
    const auto n = send(s, req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // an oversized body may be refused before it is all sent
    sent += static_cast<std::size_t>(n);
  }
  std::string all;
  char buf[65536];
  for (ssize_t n; (n = recv(s, buf, sizeof buf, 0)) > 0;) all.append(buf, static_cast<std::size_t>(n));
  close(s);
  const auto end = all.find("\r\n\r\n");
  if (end == std::string::npos) return r;
  r.head = all.substr(0, end);
  r.body = all.substr(end + 4);
  r.status = std::stoi(r.head.substr(9, 3));
  return r;
}

}  // namespace dtsim::test::serve
