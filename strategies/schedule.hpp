#pragma once
#include <optional>
#include <string>
#include <vector>

namespace dtsim::strategies {

enum class Schedule { Naive, GPipe, OneFOneB, Interleaved, PipeDream, PipeDream2BW, ZeroBubbleH1 };
const char* to_string(Schedule s);
// The names a scenario may give, in the order `dtsim describe` lists them; and back. Every
// reader and writer of a schedule's name goes through these (config, sweep --write-best).
std::vector<std::string> schedule_names();
std::optional<Schedule> schedule_from_string(const std::string& name);

// One forward or backward pass of one micro-batch through one of a stage's model chunks.
struct PipeOp {
  int micro_batch = 0;
  int chunk = 0;  // local chunk 0..v-1; model chunk = chunk * stages + stage
  bool forward = true;
  // Zero-bubble schedules split a backward into its input-gradient pass (B) and its
  // weight-gradient pass (W); the other schedules run the whole backward at once.
  enum class Part { Whole, Input, Weight };
  Part part = Part::Whole;
  // Asynchronous schedules (no flush): a backward of the previous step's micro-batch that this
  // step's window of the stage's stream runs.
  bool previous_step = false;
};

// The order in which `stage` runs its passes:
// - naive: one micro-batch at a time through the whole pipeline (forward then backward);
// - gpipe: all forwards, then all backwards (Huang et al. 2019);
// - 1f1b: PipeDream-Flush, stages - stage - 1 warm-up forwards, then one forward one backward
//   (Narayanan et al. 2021);
// - interleaved: Megatron's interleaved 1F1B over `chunks` model chunks per stage (needs
//   micro_batches to be a multiple of stages);
// - pipedream, pipedream-2bw: 1F1B without a flush (Narayanan et al. SOSP 2019; ICML 2021). A
//   step is one window of m forwards and m backwards of each stage's endless stream: stage s
//   runs F(j) then the backward of the micro-batch p - s - 1 before it, the first ones being the
//   previous step's (previous_step). Needs micro_batches >= stages;
// - zero-bubble-h1: ZB-H1 (Qi et al. ICLR 2024, Sec. 3.1): 1F1B's warm-up, each backward split
//   into B then W, stage s deferring its W passes by s micro-batches so they fill the drain;
//   at most p micro-batches in flight on any stage, as 1F1B's first stage.
std::vector<PipeOp> stage_schedule(Schedule s, int stages, int stage, int micro_batches, int chunks);

// The most activations `stage` holds at once under GPipe, 1F1B and interleaved 1F1B, without
// walking the schedule: kept[c] is what one micro-batch keeps from its forward through local
// chunk c to its backward (v = kept.size() chunks). GPipe holds all m micro-batches, 1F1B
// min(p - stage, m) (Narayanan et al. 2021, Sec. 2.2); interleaved, after the k-th steady
// backward, the first W + k + 1 forwards less the first k backwards, which repeats every p v
// passes. Equal to the walk's running sum bit for bit because it is only given where every sum
// is exact (whole bytes, totals below 2^53); elsewhere, and for other schedules, nullopt: walk.
std::optional<double> peak_in_flight(Schedule s, int stages, int stage, int micro_batches, const std::vector<double>& kept);

// Idle time over ideal compute time in the uniform case: (p-1)/m for GPipe and 1F1B,
// (p-1)/(v m) interleaved (Narayanan et al. 2021, Sec. 2.2), p-1 for the naive split.
// Asynchronous schedules have none in the steady state; ZB-H1 (p-1)(F+B-W)/(m(F+B+W)) with
// equal F, B and W passes, i.e. (p-1)/(3m).
double bubble_fraction(Schedule s, int stages, int micro_batches, int chunks);

// ZB-H1's bubble over ideal compute for passes of tf (forward), tb (input gradient) and tw (weight
// gradient) seconds: (p-1)(tf+tb-tw) / (m (tf+tb+tw)) (Qi et al. 2024, Sec. 3.1).
double zero_bubble_h1_fraction(int stages, int micro_batches, double tf, double tb, double tw);

// Weight versions stage `stage` keeps: PipeDream stashes one per micro-batch in flight (p - s,
// Narayanan et al. 2019, Sec. 3.3), PipeDream-2BW two (2021, Sec. 3.1), the others one.
int weight_versions(Schedule s, int stages, int stage);
// Updates the gradient a stage applies lags behind sequential SGD: PipeDream's stage s computes
// its gradient on weights missing the p - s - 1 micro-batches still in flight ahead of it;
// 2BW's update uses gradients of the version before (W(t+1) = W(t) - lr grad f(W(t-1)), delay 1).
int weight_staleness(Schedule s, int stages, int stage);
// Schedules without a flush: a step is a window of the stage's endless stream.
bool asynchronous(Schedule s);

}  // namespace dtsim::strategies
