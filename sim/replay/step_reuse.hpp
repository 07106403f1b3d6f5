#pragma once
#include <cstddef>
#include <functional>
#include <vector>

namespace dtsim::replay {

struct Timeline;

// Repeated identical steps, replayed two and derived for the rest (issue 18, item 4).
//
// A replay of N copies of one step's graph (results::repeat_steps) is deterministic and does not
// depend on absolute time (no speed or bandwidth profiles, no per-step draws). Take the state of
// the replay at T_k, the instant the first task of step k becomes ready: every task of steps
// before k - 1 has ended, and of step k - 1 which tasks have ended, which run (since when, how
// much of each of their flows and kernels is left, their pending timers) and which wait in a
// stream's queue. When the state at T_2 is the state at T_1 shifted by D = T_2 - T_1 (step 1 in
// the place of step 0), what follows T_2 in an N-step replay is what follows T_1 in an (N-1)-step
// one, shifted by D. By induction:
//   - step 0 is what the replay saw;
//   - every step k from 1 to N - 2 is step 1 of a long replay shifted by (k - 1) D: its events up
//     to T_2 as seen, the later ones those of step 0 after T_1, shifted by D;
//   - the last step is step 1 of a two-step replay, shifted by (N - 2) D: nothing comes after it.
// So the replay holds back every task of step 2 and later once it sees the two states match, and
// runs to the end as a two-step replay would; extend() then writes the held steps. Sooner still:
// when nothing of step 0 is left at T_1, the state there is the one at time 0 (every step's first
// tasks ready at once, nothing else in flight), every step is step 0 shifted by T_1, and one step
// is replayed. When they do
// not match (steps overlap more than one deep, the pipeline has not settled), nothing is held and
// the replay runs all N steps as before. States compare to kTolerance: a timeline derived this way
// matches the full replay to rounding.
class StepReuse {
 public:
  static constexpr double kTolerance = 1e-12;

  // step_of: each task's step; per_step tasks in each step, in the same order. roots_alike: no
  // task without dependencies in its step waits in a stream's queue, where the order in which
  // tasks become ready at one instant would matter.
  StepReuse(const std::vector<int>& step_of, std::size_t per_step, int steps, bool roots_alike);

  // Set by the replay before it starts: the simulated time now, and for each running task its
  // start and what is left of it (times relative to now, amounts of work), the same way for
  // every task.
  std::function<double()> clock;
  std::function<void(const std::vector<std::size_t>& running, double now, std::vector<std::vector<double>>& out)> describe;
  // Both for the analytical replays, whose running task is all in its start and predicted end:
  // `now` is their event clock, `t` the timeline they fill.
  void follow(const double& now, const Timeline& t);

  // The dispatcher reports what happens to each task; ready() says whether to hold it back.
  bool ready(std::size_t task);
  void started(std::size_t task) { status_[task] = kRunning; }
  void ended(std::size_t task) { status_[task] = kEnded; }

  bool reused() const { return reused_; }
  // With reused(): writes steps 2.. N - 1 (and step 1's events after T_2) into the timeline of the
  // two steps replayed. `flows_per_launch`: the replay counted every collective's flows each time
  // it ran (SimGrid); else once per distinct collective (analytical).
  void extend(Timeline& t, bool flows_per_launch) const;

 private:
  enum Status : char { kWaiting = 0, kQueued = 1, kRunning = 2, kEnded = 3 };
  struct State {
    double at = 0;
    bool valid = false;
    std::vector<char> status;                 // step k - 1's tasks
    std::vector<std::vector<double>> running;  // of those running: describe()'s values
  };
  State take(int k) const;
  static bool same(const State& a, const State& b);

  const std::vector<int>& step_of_;
  std::size_t per_step_;
  int steps_;
  bool roots_alike_;
  int held_from_ = 2;  // the first step held back once reused
  std::vector<char> status_;
  int seen_ = 0;  // highest step with a task ready so far
  bool decided_ = false, reused_ = false;
  State first_, second_;  // at T_1 and T_2
};

}  // namespace dtsim::replay
