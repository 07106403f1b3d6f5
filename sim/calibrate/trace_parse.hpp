#pragma once
// A PyTorch profiler trace (torch.profiler's export_chrome_trace, written by kineto's
// ChromeTraceLogger, pytorch/kineto libkineto/src/output_json.cpp): {"traceEvents": [...]} of
// complete events ("ph": "X") with "cat", "name", "ts" and "dur" in microseconds. GPU kernels are
// cat "kernel" (args "device", "stream", "correlation"); their launches on the host cat
// "cuda_runtime" ("cudaLaunchKernel", args "correlation"). Older PyTorch wrote "Kernel" and
// "Runtime"; both are read.
#include <array>
#include <string>
#include <vector>

namespace dtsim::calibrate {

// What a kernel is for, from its name: the one place a kernel's name is read (trace_roles.cpp).
enum class TraceRole { Gemm, Attention, Elementwise, Nccl, Optimizer, Copy, Other };
inline constexpr int kTraceRoles = 7;
const char* to_string(TraceRole r);
TraceRole role_of_kernel(const std::string& name);

struct TraceKernel {
  std::string name;
  TraceRole role = TraceRole::Other;
  double ts_us = 0, dur_us = 0;
  long long device = 0, stream = 0, correlation = -1;
};
struct TraceLaunch {
  double ts_us = 0, dur_us = 0;
  long long pid = 0, tid = 0, correlation = -1;
};

struct Trace {
  std::string path;
  std::vector<TraceKernel> kernels;  // and memory copies/sets (role Copy)
  std::vector<TraceLaunch> launches;  // kernel launches on the host
};

// InputError naming the file and the JSON pointer of an event that is not one (no name, a
// negative or missing duration), for a file that is not a trace, or one without GPU kernels.
Trace parse_trace(const std::string& path);

// What the trace says, by role, and what it says of the host's dispatch per kernel.
struct TraceSummary {
  std::array<double, kTraceRoles> busy_us{};  // kernel time summed by role
  std::array<int, kTraceRoles> count{};
  double span_us = 0;        // first kernel start to last kernel end
  double gpu_idle_us = 0;    // gaps between consecutive kernels on each stream, summed
  // Medians over the trace: host time from one kernel launch to the next on the same thread
  // (the per-kernel dispatch a stack prices), each launch call's own duration, and the gap
  // between a kernel's end and the next kernel's start on its stream.
  double dispatch_us = 0, launch_call_us = 0, gap_us = 0;
  int launch_intervals = 0, gaps = 0;
  // Kernels the host's dispatch paced: their stream sat idle before them while their launch came
  // less than 2 dispatch intervals before they started (the GPU was waiting for the host).
  int host_bound_kernels = 0;
};
TraceSummary summarize(const Trace& t);

}  // namespace dtsim::calibrate
