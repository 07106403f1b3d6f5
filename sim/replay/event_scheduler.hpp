#pragma once
// The SimGrid replay's scheduling of tasks, phases and flows, without SimGrid: simgrid_replay.cpp
// derives from EventScheduler and turns its requests into SimGrid activities and timers.
#include <cstddef>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/replay/dispatch.hpp"
#include "sim/replay/lowering.hpp"
#include "sim/replay/replay.hpp"

namespace dtsim::replay {

// Starts each task's activities once it is ready and follows their completions. Dependencies are
// counted here rather than given to SimGrid: SimGrid 3.32 slows down quadratically with
// activities waiting on dependencies (60,000 pre-created Execs took 9 s, created on demand 0.3 s).
class EventScheduler {
 public:
  EventScheduler(const ReplayInput& in, PreparedOf prepared);
  virtual ~EventScheduler() = default;

  void start();
  Timeline take() { return std::move(out_); }

 protected:
  enum class Role { Last, Flow, PhaseEnd };
  using Pending = std::multimap<std::size_t, double>::iterator;  // a timer StepReuse sees

  // The engine's side. Each activity reports its end through done(task, role), each timer
  // through fired(task, role, pending).
  virtual double now() const = 0;
  virtual void timer(double date, std::size_t task, Role r, Pending pending) = 0;
  virtual void exec(std::size_t task, int endpoint, double seconds, Role r) = 0;
  virtual void send(std::size_t task, int src, int dst, double bytes) = 0;  // a flow, Role::Flow
  virtual void send_chain(std::size_t task, int chain, double bytes) = 0;   // on chain's host pair
  virtual void slow_cores(int endpoint, bool slow) = 0;                     // see share_cores
  // Work left in each activity in flight, by task.
  virtual void remaining(std::unordered_map<std::size_t, std::vector<double>>& left) const = 0;

  void fired(std::size_t task, Role r, Pending pending);
  void done(std::size_t task, Role r);

 private:
  struct Running {  // a collective in flight: its phases and the one running
    const Prepared* prep = nullptr;
    std::size_t phase = 0;
    double phase_start = 0;
    int flows_left = 0;  // of the phase's flows and server work
  };

  void describe(const std::vector<std::size_t>& running, double now, std::vector<std::vector<double>>& d) const;
  void find_timed_ranks();
  void after(double seconds, std::size_t task, Role r);
  void start_phase(std::size_t task);
  void begin(std::size_t i);
  void share_cores(std::size_t task);
  void release_cores(std::size_t task);
  void finish(std::size_t task);

  const ReplayInput& in_;
  const taskgraph::TaskGraph& g_;
  PreparedOf prepared_;
  Dispatcher dispatch_;
  std::unordered_map<std::size_t, Running> running_;
  std::multimap<std::size_t, double> timers_;  // pending timers by task, with StepReuse
  std::vector<char> timed_rank_;  // by rank: its compute tasks run as timers
  // Shared cores: per endpoint, its collectives in flight; per collective, its GPUs' endpoints.
  std::map<int, int> endpoint_comms_;
  std::unordered_map<std::size_t, std::vector<int>> comm_endpoints_;
  Timeline out_;
};

}  // namespace dtsim::replay
