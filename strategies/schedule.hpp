#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dtsim::strategies {

struct PipelineSchedule;

// A pipeline schedule: its place in the registry (strategies/schedules/registry.cpp), each
// schedule one file under strategies/schedules/ and one line there, so a new one needs no
// enumerator. `->` reads what it is (PipelineSchedule below).
class Schedule {
 public:
  constexpr Schedule() = default;
  constexpr explicit Schedule(std::uint8_t index) : index_(index) {}
  constexpr int index() const { return index_; }
  const PipelineSchedule* operator->() const;
  friend constexpr bool operator==(Schedule, Schedule) = default;
  // The schedules code picks by name (the default, the sweep's candidates): the registry's first
  // seven, in its order (a test checks their names).
  static const Schedule Naive, GPipe, OneFOneB, Interleaved, PipeDream, PipeDream2BW, ZeroBubbleH1;

 private:
  std::uint8_t index_ = 0;
};
inline constexpr Schedule Schedule::Naive{0};
inline constexpr Schedule Schedule::GPipe{1};
inline constexpr Schedule Schedule::OneFOneB{2};
inline constexpr Schedule Schedule::Interleaved{3};
inline constexpr Schedule Schedule::PipeDream{4};
inline constexpr Schedule Schedule::PipeDream2BW{5};
inline constexpr Schedule Schedule::ZeroBubbleH1{6};

// Every registered schedule, in the registry's order (strategies/schedules/registry.cpp).
const std::vector<const PipelineSchedule*>& schedule_registry();
std::vector<Schedule> all_schedules();
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

// One micro-batch's passes as the closed form prices them (sim/results/closed_form.cpp): per
// model chunk j (on stage j % stages) its forward F and backward B; per stage f and b, the sums
// over its chunks; their totals over the stages (sum of f + b, the largest f + b, f and b), and
// the hops there and back between every pair of neighbouring chunks.
struct PipelinePrices {
  int stages = 0;
  double micro_batches = 0;
  const std::vector<double>&F, &B, &f, &b;
  double sum = 0, worst = 0, worst_f = 0, worst_b = 0, hops = 0;
};

// What a schedule is: one of these in its own file under strategies/schedules/. Its traits say
// what the rest of dtsim asks of a schedule, so none compares schedules by name.
struct PipelineSchedule {
  const char* name = "";  // as scenarios spell it
  // The order in which `stage` runs its passes over its `chunks` local chunks.
  std::vector<PipeOp> (*passes)(int stages, int stage, int micro_batches, int chunks) = nullptr;
  // Idle time over ideal compute time with uniform passes.
  double (*bubble)(int stages, int micro_batches, int chunks) = nullptr;
  // peak_in_flight's closed form, given sums that are exact; nullptr: the memory walk.
  std::optional<double> (*peak)(int stages, int stage, int micro_batches, const std::vector<double>& kept) = nullptr;
  int (*weight_versions)(int stages, int stage) = nullptr;  // nullptr: one
  int (*staleness)(int stages, int stage) = nullptr;        // nullptr: none
  // The passes up to the last backward on stage 0, in closed form; nullptr: only the replay
  // prices the schedule ("pipeline schedule").
  double (*closed_form)(const PipelinePrices&) = nullptr;
  // Runs `virtual_stages` model chunks per stage, taking turns as Megatron's interleaved 1F1B
  // does (so micro-batches a multiple of stages).
  bool chunked = false;
  // No flush: a step is a window of each stage's endless stream (asynchronous).
  bool no_flush = false;
  // Each backward updates its stage's weights (PipeDream): no optimizer step, no ZeRO.
  bool updates_per_backward = false;
  // Each backward runs as its input-gradient pass B and its weight-gradient pass W (zero bubble).
  bool splits_backward = false;
  // Every forward before any backward: each micro-batch adds its activations to the peak.
  bool forwards_before_backwards = false;
  bool with_experts = true;  // modelled with expert parallelism
};

// The order in which `stage` runs its passes (the schedule's own file says which and why).
std::vector<PipeOp> stage_schedule(Schedule s, int stages, int stage, int micro_batches, int chunks);

// The most activations `stage` holds at once, without walking the schedule: kept[c] is what one
// micro-batch keeps from its forward through local chunk c to its backward (v = kept.size()
// chunks). Equal to the walk's running sum bit for bit because it is only given where every sum
// is exact (whole bytes, totals below 2^53) and the schedule has a closed form; elsewhere
// nullopt: walk.
std::optional<double> peak_in_flight(Schedule s, int stages, int stage, int micro_batches, const std::vector<double>& kept);

// Idle time over ideal compute time in the uniform case (each schedule's file gives its form).
double bubble_fraction(Schedule s, int stages, int micro_batches, int chunks);

// ZB-H1's bubble over ideal compute for passes of tf (forward), tb (input gradient) and tw (weight
// gradient) seconds: (p-1)(tf+tb-tw) / (m (tf+tb+tw)) (Qi et al. 2024, Sec. 3.1).
double zero_bubble_h1_fraction(int stages, int micro_batches, double tf, double tb, double tw);

// Weight versions stage `stage` keeps (one unless the schedule stashes more), and how many
// updates the gradient it applies lags behind sequential SGD (none unless the schedule says).
int weight_versions(Schedule s, int stages, int stage);
int weight_staleness(Schedule s, int stages, int stage);
// Schedules without a flush: a step is a window of the stage's endless stream.
bool asynchronous(Schedule s);

}  // namespace dtsim::strategies
