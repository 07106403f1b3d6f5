#pragma once
#include <string>
#include <vector>

#include "sim/network/platform.hpp"
#include "sim/replay/step_reuse.hpp"
#include "sim/taskgraph/task_graph.hpp"

namespace dtsim::replay {

// Changes over time that only the SimGrid backend replays (SimGrid speed and bandwidth profiles).
struct Variability {
  struct Throttle {
    int gpu = 0;
    double start_s = 0, duration_s = 0, slowdown = 1;
  };
  struct Flap {  // the GPU's NIC: degraded for `degraded_s` at the end of every `period_s`
    int gpu = 0;
    double period_s = 0, degraded_s = 0, bandwidth_fraction = 1;
    double degraded_latency_s = -1;  // the NIC link's latency while degraded; -1 leaves it
  };
  std::vector<Throttle> throttles;
  std::vector<Flap> flaps;
};

// Stragglers' duration multipliers: a compute task's is its GPU's draw for its step, any other
// task's 1. A table by (step, GPU) rather than a number per task, which cost 18 MB at 2.3
// million tasks.
struct TaskScales {
  std::size_t gpus = 0;       // the table's row length (the highest GPU id drawn for, plus one)
  std::vector<double> draw;   // [step * gpus + gpu]
  // [step * gpus + gpu]: the GPU whose slowdown set that multiplier, the member of the tensor x
  // context group the compute task's GPU stands for (reports name it); empty: the GPU itself.
  std::vector<int> pacer;
  int pacer_of(std::size_t step, int gpu) const {
    const std::size_t at = step * gpus + static_cast<std::size_t>(gpu);
    return gpu >= 0 && static_cast<std::size_t>(gpu) < gpus && at < pacer.size() ? pacer[at] : gpu;
  }
  const std::vector<int>* step_of = nullptr;  // each task's step; null or empty: all in step 0
  double of(const taskgraph::Task& t, std::size_t task) const {
    if (t.is_collective || t.category != taskgraph::Category::Compute) return 1.0;
    const std::size_t k = step_of && !step_of->empty() ? static_cast<std::size_t>((*step_of)[task]) : 0;
    return draw[k * gpus + static_cast<std::size_t>(t.rank)];
  }
};

struct ReplayInput {
  const taskgraph::TaskGraph& graph;
  const std::vector<double>& work_seconds;  // per Work: kernels plus inline collectives
  const network::Platform& platform;
  const TaskScales* task_scale = nullptr;  // stragglers
  const Variability* variability = nullptr;
  // Shared cores (cost::DeviceProfile::comm_core_share): while a collective a GPU takes part in
  // is in flight, that GPU's compute runs at 1 - share of its speed.
  double comm_core_share = 0;
  // Repeated steps: when set, the replay may run two of them and derive the others (StepReuse).
  StepReuse* reuse = nullptr;
  // When the graph is copies of one step (results::repeat_steps): tasks per copy. Later copies
  // take the first one's lowered collectives instead of looking them up again.
  std::size_t step_tasks = 0;
  double seconds(std::size_t task) const {
    const auto& t = graph.tasks[task];
    return work_seconds[static_cast<std::size_t>(t.work)] * (task_scale ? task_scale->of(t, task) : 1.0);
  }
};

struct Timeline {
  std::vector<double> start, end;  // per task, seconds
  double makespan = 0;
  std::string backend, network_model;
  std::size_t flows = 0;  // network flows simulated
  int steps_replayed = 0;  // of several steps, how many the replay ran (StepReuse derives the others)
};

// Discrete-event replay on SimGrid's flow-level network model. SimGrid's engine cannot be reset:
// call this at most once per process.
Timeline replay_simgrid(const ReplayInput& in);

// Same task graph and the same flows, each collective priced alone (no contention between
// collectives): fast, repeatable in one process, used by sweeps and as a cross-check.
Timeline replay_analytical(const ReplayInput& in);
// The analytical replay when collectives take a share of the cores (analytical_shared.cpp): a
// compute task's remaining work runs at the rate its GPU has left, changing as collectives on
// that GPU start and end.
Timeline replay_analytical_shared(const ReplayInput& in);

// Where the time goes on one GPU (by default the one whose own stream ends last), from 0 to the
// horizon (by default the makespan). Adds up to the horizon:
// - busy time: compute (less the inline collectives inside it: exposed communication), the
//   optimizer, and kernels that serve communication (compression). Kernels that run at once share
//   the GPU: each gets an equal part of that time.
// - idle time, charged to what the GPU waited for, followed back along the chain of tasks it waited
//   on: a collective or stage-to-stage transfer in flight (or queued) is exposed communication; a
//   data loader is input stall; a GPU of another data-parallel replica that finished later is
//   straggler wait; compute of another stage of its pipeline is pipeline bubble, except what those
//   stages were slower than this GPU's pace (sim/replay/waits.hpp): straggler wait as far as
//   slowdowns explain it, stage imbalance as far as uneven work across stages does.
struct Breakdown {
  double compute = 0, exposed_communication = 0, pipeline_bubble = 0, optimizer = 0, straggler_wait = 0, input_stall = 0;
  double stage_imbalance = 0;
  double checkpoint = 0;  // not replayed: the chief's synchronous saves, amortised per step (results layer)
  // What compute (and the optimizer) lost to the SMs collectives held beside it: a software
  // stack's communication interference (sim/cost/comm_interference.hpp), in the replay's rate and
  // inside tensor-parallel overlap. Never set without a stack.
  double comm_interference = 0;
  int rank = 0;  // -1: averaged over several GPUs
  double total() const {
    return compute + exposed_communication + pipeline_bubble + optimizer + straggler_wait + input_stall + stage_imbalance + checkpoint +
           comm_interference;
  }
  Breakdown& operator+=(const Breakdown& o);
  Breakdown& operator*=(double f);
};
// Idle time on one GPU where it happened, charged to the part of the breakdown it adds to, so a
// report can colour each gap by its cause. A wait for peer stages is one stretch of time: its
// late part (stage imbalance, then straggler wait) is put at its end, where the GPU would have
// been released at a uniform pace; what is left of it, at its start, is pipeline bubble.
enum class IdleCause { PipelineBubble, StageImbalance, StragglerWait, ExposedCommunication, InputStall, CommInterference };
const char* to_string(IdleCause c);  // "pipeline bubble", as the breakdown names the part
struct IdleSpan {
  double start = 0, end = 0;
  IdleCause cause = IdleCause::PipelineBubble;
};
struct BreakdownScope {
  int rank = -1;         // -1: the GPU whose own stream ends last
  double horizon = -1;   // -1: the makespan
  std::vector<IdleSpan>* idle = nullptr;  // when set, receives the idle spans, in time order
  // Shared cores (ReplayInput::comm_core_share): of the GPU's busy time while a collective it
  // takes part in is in flight, this share is the collectives' progress, charged to exposed
  // communication rather than to what ran.
  double comm_core_share = 0;
  // A GPU's SMs rather than a CPU's cores: that share goes to comm_interference instead.
  bool sms = false;
  // Per Work, the seconds a tensor-parallel overlap adds to it by slowing its GEMMs (booked as
  // comm_interference, as work_comm_seconds is as exposed communication); null: none.
  const std::vector<double>* work_interference_seconds = nullptr;
  // Peer stages ran late only because collectives held SMs beside their compute (a stack's
  // interference, no stragglers): that lateness is comm_interference, not straggler wait.
  bool slowed_by_interference = false;
};
Breakdown step_breakdown(const taskgraph::TaskGraph& g, const Timeline& t, const std::vector<double>& work_seconds,
                         const std::vector<double>& work_comm_seconds, BreakdownScope scope = {});

// The groups of a collective task as GPU id lists.
std::vector<std::vector<int>> groups_of(const taskgraph::TaskGraph& g, const taskgraph::Collective& c);

}  // namespace dtsim::replay
