#pragma once
#include <vector>

namespace dtsim::strategies {

enum class Schedule { Naive, GPipe, OneFOneB, Interleaved };
const char* to_string(Schedule s);

// One forward or backward pass of one micro-batch through one of a stage's model chunks.
struct PipeOp {
  int micro_batch = 0;
  int chunk = 0;  // local chunk 0..v-1; model chunk = chunk * stages + stage
  bool forward = true;
};

// The order in which `stage` runs its passes:
// - naive: one micro-batch at a time through the whole pipeline (forward then backward);
// - gpipe: all forwards, then all backwards (Huang et al. 2019);
// - 1f1b: PipeDream-Flush, stages - stage - 1 warm-up forwards, then one forward one backward
//   (Narayanan et al. 2021);
// - interleaved: Megatron's interleaved 1F1B over `chunks` model chunks per stage (needs
//   micro_batches to be a multiple of stages).
std::vector<PipeOp> stage_schedule(Schedule s, int stages, int stage, int micro_batches, int chunks);

// Idle time over ideal compute time in the uniform case: (p-1)/m for GPipe and 1F1B,
// (p-1)/(v m) interleaved (Narayanan et al. 2021, Sec. 2.2), p-1 for the naive split.
double bubble_fraction(Schedule s, int stages, int micro_batches, int chunks);

}  // namespace dtsim::strategies
