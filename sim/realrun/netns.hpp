#pragma once
#include <string>
#include <vector>

// A shaped network for `dtsim realrun --bandwidth-Gbps` (root only): one network namespace per
// member, each with a veth link into a bridge in a switch namespace, every link's two directions
// limited by tc's token bucket to the rate asked. The namespaces are this process's own
// ("dtsim-PID-..."); nothing is routed to the host's networks, and no link is ever made in the
// host's namespace. Removed on destruction, or by the next run after a SIGKILL.
namespace dtsim::realrun {

class ShapedNetwork {
 public:
  ShapedNetwork(int members, double gbps);  // throws std::runtime_error, having removed what it made
  ~ShapedNetwork();
  ShapedNetwork(const ShapedNetwork&) = delete;
  ShapedNetwork& operator=(const ShapedNetwork&) = delete;

  std::string netns_path(int member) const;  // /run/netns/NAME, for setns
  std::string address(int member) const;     // the member's IPv4 address
  static constexpr unsigned short kPort = 29500;  // free in every namespace: each is private

 private:
  void remove();
  std::vector<std::string> names_;  // members', then the switch's
};

// Moves the calling thread (a process's only thread: the process) into a namespace.
void enter_netns(const std::string& path);

// Names in `folder` (/run/netns) of namespaces a ShapedNetwork made ("dtsim-PID-N", "dtsim-PID-switch")
// whose process is gone: a run ended by SIGKILL, which no destructor outlives.
std::vector<std::string> stale_namespaces(const std::string& folder);

// Runs a program (no shell) with `argv`, waits; its exit status (127 if it could not start).
int run_program(const std::vector<std::string>& argv);

}  // namespace dtsim::realrun
