#pragma once
// What a pass's inline collectives add to it (tensor and context parallelism), in one place for
// the replay's prices (simulate.cpp) and the closed form (closed_form.cpp).
#include <functional>

#include "sim/taskgraph/task_graph.hpp"

namespace dtsim::results {

// Seconds one InlineCollective adds to its work: exposed communication, and what the GEMMs it
// overlaps lose to the SMs its kernels hold (comm_interference).
struct InlineCost {
  double exposed = 0, interference = 0;
};

// `total`: all c.count messages priced alone on the group (network::inline_time);
// `alone(bytes)`: one message of the collective's op on its group moving `bytes`, priced alone;
// `kernel_s`: the kernel it hides behind (c.hidden_by), as the stack prices it; `margin_share`:
// c.margin_sms as a share of the device's SMs. Without a cut (c.cut == None), the count messages
// block the stream, less what the kernel beside each hides (ring attention: hidden_share of it).
// With a cut, the GEMM runs at 1 - margin_share throughout (Transformer Engine's set_sm_margin),
// K' = kernel_s / (1 - margin_share), and per message:
// - Ring (n chunks): n - 1 steps of c = alone(bytes) / (n - 1) each beside one K'/n slice; exposed
//   (n - 1) max(0, c - K'/n).
// - Pipeline (n chunks): slice i's share r = alone(bytes / n) runs after slice i, beside slice i + 1;
//   exposed (n - 1) max(0, r - K'/n) + r, the last share after the last slice.
// - Bulk: the whole collective beside the whole GEMM; exposed max(0, alone(bytes) - K').
// The interference is K' - kernel_s in each.
// An overlapped expert all-to-all (c.hidden_work >= 0; `kernel_s` is then that whole work) holds
// its SMs only while in flight, with the compute beside it running on the rest: with a = total /
// count, if a >= K' the compute is slowed throughout (exposed a - K', interference K' - kernel_s),
// else it is slowed for a only (exposed 0, interference margin_share x a).
InlineCost inline_cost(const taskgraph::InlineCollective& c, double total, const std::function<double(double)>& alone,
                       double kernel_s, double margin_share);

}  // namespace dtsim::results
