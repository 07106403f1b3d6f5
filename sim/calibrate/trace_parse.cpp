#include "sim/calibrate/trace_parse.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <tuple>

#include "sim/core/errors.hpp"
#include "sim/core/files.hpp"
#include "sim/core/json_reader.hpp"

namespace dtsim::calibrate {

namespace {

// A trace of a few steps is tens of MiB; a whole run's is not what calibrate needs.
constexpr std::uintmax_t kMaxTraceBytes = std::uintmax_t{256} << 20;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

struct Event {
  const Json& e;
  const std::string& file;
  std::string at;
  double number(const char* key) const {
    if (!e.contains(key) || !e[key].is_number() || !std::isfinite(e[key].get<double>()))
      throw InputError(file, at + "/" + key, "expected a number (microseconds)");
    return e[key].get<double>();
  }
  long long arg(const char* key, long long fallback) const {
    if (!e.contains("args") || !e["args"].is_object() || !e["args"].contains(key) || !e["args"][key].is_number_integer()) return fallback;
    return e["args"][key].get<long long>();
  }
  // A process or thread id (a number; kineto writes GPU "pid"s as numbers too), else 0.
  long long id(const char* key) const { return e.contains(key) && e[key].is_number_integer() ? e[key].get<long long>() : 0; }
  std::string name() const {
    if (!e.contains("name") || !e["name"].is_string()) throw InputError(file, at + "/name", "expected the event's name, a string");
    return e["name"].get<std::string>();
  }
};

const Json& events_of(const Json& doc, const std::string& file) {
  if (doc.is_array()) return doc;  // the Chrome trace format's bare-array form
  if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array())
    throw InputError(file, "/traceEvents", "expected a Chrome trace: an object whose \"traceEvents\" is an array (torch.profiler's "
                                           "export_chrome_trace)");
  return doc["traceEvents"];
}

void read_event(const Event& ev, Trace& t) {
  if (!ev.e.contains("ph") || ev.e["ph"] != "X" || !ev.e.contains("cat") || !ev.e["cat"].is_string()) return;
  const std::string cat = lower(ev.e["cat"].get<std::string>());
  const bool kernel = cat == "kernel", copy = cat == "gpu_memcpy" || cat == "gpu_memset" || cat == "memcpy" || cat == "memset";
  const bool runtime = cat == "cuda_runtime" || cat == "runtime" || cat == "cuda_driver";
  if (!kernel && !copy && !runtime) return;
  const std::string name = ev.name();
  const double ts = ev.number("ts"), dur = ev.number("dur");
  if (dur < 0) throw InputError(ev.file, ev.at + "/dur", "a negative duration");
  if (runtime) {
    if (name.find("LaunchKernel") != std::string::npos || name.find("LaunchCooperativeKernel") != std::string::npos)
      t.launches.push_back({ts, dur, ev.id("pid"), ev.id("tid"), ev.arg("correlation", -1)});
    return;
  }
  t.kernels.push_back({name, copy ? TraceRole::Copy : role_of_kernel(name), ts, dur, ev.arg("device", 0), ev.arg("stream", 0),
                       ev.arg("correlation", -1)});
}

}  // namespace

Trace parse_trace(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > kMaxTraceBytes)
    throw InputError(path, "", fmt::format("{} bytes is larger than the {} MiB a trace may have: profile one or two steps "
                                           "(torch.profiler.schedule(active=1))", size, kMaxTraceBytes >> 20));
  const Json doc = parse_json_text(read_text_file(path), path);
  Trace t;
  t.path = path;
  const Json& events = events_of(doc, path);
  const std::string base = doc.is_array() ? "" : "/traceEvents";
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (!events[i].is_object()) throw InputError(path, fmt::format("{}/{}", base, i), "expected an event object");
    read_event({events[i], path, fmt::format("{}/{}", base, i)}, t);
  }
  if (std::none_of(t.kernels.begin(), t.kernels.end(), [](const TraceKernel& k) { return k.role != TraceRole::Copy; }))
    throw InputError(path, "", "no GPU kernels (events with \"cat\": \"kernel\"): profile with "
                               "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]");
  return t;
}

}  // namespace dtsim::calibrate

namespace dtsim::calibrate {

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Host time from each kernel launch to the next on the same thread.
std::vector<double> launch_intervals(const Trace& t) {
  std::map<std::pair<long long, long long>, std::vector<double>> by_thread;
  for (const auto& l : t.launches) by_thread[{l.pid, l.tid}].push_back(l.ts_us);
  std::vector<double> out;
  for (auto& [thread, ts] : by_thread) {
    std::sort(ts.begin(), ts.end());
    for (std::size_t i = 1; i < ts.size(); ++i) out.push_back(ts[i] - ts[i - 1]);
  }
  return out;
}

// Each kernel's idle gap before it on its stream (0 for a stream's first kernel or one that
// queued behind the one before), by index into t.kernels.
std::vector<double> gaps_before(const Trace& t) {
  std::map<std::pair<long long, long long>, std::vector<std::size_t>> streams;
  for (std::size_t i = 0; i < t.kernels.size(); ++i) streams[{t.kernels[i].device, t.kernels[i].stream}].push_back(i);
  std::vector<double> gap(t.kernels.size(), 0.0);
  for (auto& [stream, idx] : streams) {
    std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return t.kernels[a].ts_us < t.kernels[b].ts_us; });
    for (std::size_t j = 1; j < idx.size(); ++j) {
      const auto& prev = t.kernels[idx[j - 1]];
      gap[idx[j]] = std::max(0.0, t.kernels[idx[j]].ts_us - (prev.ts_us + prev.dur_us));
    }
  }
  return gap;
}

}  // namespace

TraceSummary summarize(const Trace& t) {
  TraceSummary s;
  double first = t.kernels.front().ts_us, last = first;
  for (const auto& k : t.kernels) {
    s.busy_us[static_cast<std::size_t>(k.role)] += k.dur_us;
    ++s.count[static_cast<std::size_t>(k.role)];
    first = std::min(first, k.ts_us);
    last = std::max(last, k.ts_us + k.dur_us);
  }
  s.span_us = last - first;
  const auto intervals = launch_intervals(t);
  s.dispatch_us = median(intervals);
  s.launch_intervals = static_cast<int>(intervals.size());
  std::vector<double> calls, positive;
  for (const auto& l : t.launches) calls.push_back(l.dur_us);
  s.launch_call_us = median(calls);
  const auto gap = gaps_before(t);
  std::map<long long, double> launched_at;
  for (const auto& l : t.launches)
    if (l.correlation >= 0) launched_at[l.correlation] = l.ts_us;
  for (std::size_t i = 0; i < gap.size(); ++i) {
    if (gap[i] <= 0) continue;
    positive.push_back(gap[i]);
    s.gpu_idle_us += gap[i];
    const auto it = launched_at.find(t.kernels[i].correlation);
    if (it != launched_at.end() && t.kernels[i].ts_us - it->second < 2 * s.dispatch_us) ++s.host_bound_kernels;
  }
  s.gap_us = median(positive);
  s.gaps = static_cast<int>(positive.size());
  return s;
}

}  // namespace dtsim::calibrate
