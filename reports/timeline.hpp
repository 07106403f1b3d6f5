#pragma once
// The timeline of report.html: a row per simulated GPU, its idle time coloured by cause.
#include <string>

#include "sim/results/result.hpp"

namespace dtsim::reports::timeline {

struct Drawing {
  std::string note;  // which GPUs are drawn, and how dense rows are drawn
  std::string svg;
};
// One row per simulated GPU: compute with the idle gaps coloured by what the GPU waited for
// (replay::IdleSpan), its data loader below, then its collectives; time to the right. Past
// `max_gpus`, an even sample by rank (first and last included), said in the note.
Drawing draw(const results::Result& r, int max_gpus);
// The colours' key, as HTML; `interference`: with waits made late by communication interference
// (a result with a software stack, Result::shows_interference).
std::string legend(bool interference = false);

}  // namespace dtsim::reports::timeline
