#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "reports/memory_curve.hpp"
#include "reports/reports.hpp"
#include "sim/network/algorithm_registry.hpp"
#include "sim/core/units.hpp"

namespace dtsim::reports {

namespace {

// The kinds of track each rank gets; slices that overlap on one go to its extra tracks, tid
// kind * 100 + lane, so a track's slices never partially overlap (chrome://tracing and Perfetto
// draw such slices wrongly, or drop them).
enum Kind { kCompute = 0, kCommunication = 1, kLoader = 2 };
const char* const kKindNames[] = {"compute", "communication", "data loader"};

struct Slice {
  std::size_t task;
  int rank;
  int group;  // collectives: the group (of the task's) this rank is in; else -1
  double ts, dur;
};

// What a slice did, as far as the graph knows it: FLOPs and bytes of its kernels, and for a
// collective its operation, algorithm, buffer size, group and the link it crosses.
nlohmann::json args_of(const results::Result& r, const Slice& s) {
  const auto& g = r.replayed();
  const auto& task = g.tasks[s.task];
  nlohmann::json a = nlohmann::json::object();
  if (task.is_collective) {
    const auto& c = task.collective();
    a["op"] = taskgraph::to_string(c.op);
    a["algorithm"] = network::algorithm_name(c.algorithm);
    a["bytes"] = c.bytes;
    if (s.group >= 0) {
      const auto& ranks = g.groups[static_cast<std::size_t>(s.group)];
      a["group"] = s.group;
      a["group_gpus"] = ranks.size();
      // Inside one node (NVLink, PCIe) or across nodes (NICs), by the cluster's GPUs per node;
      // dedicated parameter servers or host memory sit outside every GPU's node.
      const int per_node = std::max(1, r.scenario_spec.cluster.gpus_per_node);
      bool one_node = true;
      for (int rank : ranks) one_node = one_node && rank / per_node == ranks.front() / per_node;
      const char* servers = network::unit_of(c.algorithm).server_link;
      a["link"] = servers ? servers : one_node ? "intra-node" : "inter-node";
    }
    if (c.only >= 0) a["only_rank"] = c.only;
    return a;
  }
  if (task.work < 0) return a;
  const auto& w = g.works[static_cast<std::size_t>(task.work)];
  if (task.category == taskgraph::Category::Input) {  // CPU work: samples read from storage and prepared
    const auto& p = r.scenario_spec.parallelism;
    a["work"] = w.name;
    a["samples"] = p.micro_batch;
    a["bytes"] = p.input.sample_bytes * static_cast<double>(p.micro_batch);
    a["loader_workers"] = p.input.workers_per_gpu;
    return a;
  }
  double flops = 0, bytes = 0, comm_bytes = 0;
  for (const auto& k : w.kernels) {
    flops += k.flops;
    bytes += k.bytes;
  }
  for (const auto& c : w.comms) comm_bytes += c.bytes * c.count;
  a["work"] = w.name;
  a["flops"] = flops * w.repeat;
  a["bytes"] = bytes * w.repeat;  // memory traffic of its kernels
  if (comm_bytes > 0) a["inline_collective_bytes"] = comm_bytes * w.repeat;
  return a;
}


// Where a task's slice was drawn on one rank: its track and times.
struct Placed {
  int tid;
  double ts, dur;
};

// "0-7, 16-23": ascending GPU ids as runs.
std::string runs(const std::vector<int>& ids) {
  std::string out;
  for (std::size_t i = 0; i < ids.size();) {
    std::size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += j > i ? fmt::format("{}-{}", ids[i], ids[j]) : fmt::format("{}", ids[i]);
    i = j + 1;
  }
  return out;
}

// The pipeline stage GPU `gpu` is in (strategies::Placement's layout, inverted).
int stage_of(const strategies::ParallelismSpec& p, int gpu) {
  const int inner = std::max(1, p.tensor * p.context);
  return p.pipeline_outer ? gpu / inner / p.data : gpu / inner % p.pipeline;
}

// A counter track of each stage's memory (memory_curve.hpp) on the GPU the plan's marks are for:
// the stage's GPU in the first replica, at tensor and context rank 0.
void add_memory(const results::Result& r, const std::vector<int>& shown, nlohmann::json& events) {
  const auto& p = r.scenario_spec.parallelism;
  const int inner = std::max(1, p.tensor * p.context);
  const auto curves = memory_curve::curves(r);
  for (int rank : shown) {
    const int outer = rank / inner;
    const bool first = rank % inner == 0 && (p.pipeline_outer ? outer % p.data == 0 : outer / p.pipeline == 0);
    const auto stage = static_cast<std::size_t>(stage_of(p, rank));
    if (!first || stage >= curves.size()) continue;
    for (const auto& pt : curves[stage])
      events.push_back({{"name", "memory"}, {"ph", "C"}, {"pid", rank}, {"ts", pt.t * 1e6}, {"args", {{"GiB", pt.bytes / units::kGiB}}}});
  }
}

// For each drawn rank, what it stands for: GPUs given no tasks of their own run what the drawn
// GPU of their pipeline stage runs (a strategy plans one replica when the others are copies).
std::vector<std::string> copies_of(const results::Result& r, const std::vector<int>& shown) {
  const auto& p = r.scenario_spec.parallelism;
  const int gpus = p.data * p.pipeline * p.tensor * p.context;
  auto stage = [&](int gpu) { return stage_of(p, gpu); };
  std::set<int> busy;
  for (const auto& task : r.replayed().tasks)
    if (!task.is_collective) busy.insert(task.rank);
  std::vector<std::string> out;
  for (int rank : shown) {
    std::vector<int> ids;
    const bool first_of_stage = std::none_of(busy.begin(), busy.find(rank), [&](int b) { return stage(b) == stage(rank); });
    for (int gpu = 0; gpu < gpus; ++gpu)
      if (gpu == rank || (first_of_stage && !busy.contains(gpu) && stage(gpu) == stage(rank))) ids.push_back(gpu);
    out.push_back(fmt::format("pipeline stage {}; stands for GPU{} {}", stage(rank), ids.size() > 1 ? "s" : "", runs(ids)));
  }
  return out;
}

// An arrow for each point-to-point transfer between drawn ranks (a pipeline stage's activations
// or gradients), from the task that produced it to the task on the other rank that waited for it.
void add_flows(const taskgraph::TaskGraph& g, const std::map<std::pair<std::size_t, int>, Placed>& placed,
               nlohmann::json& events) {
  int id = 0;
  for (std::size_t j = 0; j < g.tasks.size(); ++j) {
    const auto& to = g.tasks[j];
    const auto end = placed.find({j, to.rank});
    if (to.is_collective || end == placed.end()) continue;
    for (int i : to.deps) {
      const auto& sr = g.tasks[static_cast<std::size_t>(i)];
      if (!sr.is_collective || sr.collective().op != taskgraph::CollectiveOp::SendRecv) continue;
      for (int k : sr.deps) {
        const auto& from = g.tasks[static_cast<std::size_t>(k)];
        const auto start = placed.find({static_cast<std::size_t>(k), from.rank});
        if (from.is_collective || from.rank == to.rank || start == placed.end()) continue;
        // Bound to the slices that enclose each end: their middles are inside them.
        const auto& [a, b] = std::pair{start->second, end->second};
        events.push_back({{"name", sr.label()}, {"cat", "pipeline"}, {"ph", "s"}, {"id", id}, {"pid", from.rank},
                          {"tid", a.tid}, {"ts", a.ts + a.dur / 2}});
        events.push_back({{"name", sr.label()}, {"cat", "pipeline"}, {"ph", "f"}, {"bp", "e"}, {"id", id++},
                          {"pid", to.rank}, {"tid", b.tid}, {"ts", b.ts + b.dur / 2}});
      }
    }
  }
}

// Slices by rank and kind of track, in the times written (microseconds), so that the check for
// overlap is the one a reader of the file makes.
template <class Visible>
std::map<std::pair<int, int>, std::vector<Slice>> tracks_of(const taskgraph::TaskGraph& g, const replay::Timeline& t, const Visible& visible) {
  std::map<std::pair<int, int>, std::vector<Slice>> tracks;
  for (std::size_t i = 0; i < g.tasks.size(); ++i) {
    const auto& task = g.tasks[i];
    const double ts = t.start[i] * 1e6, dur = (t.end[i] - t.start[i]) * 1e6;
    if (!task.is_collective) {
      if (visible(task.rank))
        tracks[{task.rank, task.category == taskgraph::Category::Input ? kLoader : kCompute}].push_back({i, task.rank, -1, ts, dur});
      continue;
    }
    // An asynchronous push or pull names the whole group (the servers it shares) but only its
    // `only` member takes part: on that rank's track alone.
    for (int group : task.collective().groups)
      for (int rank : g.groups[static_cast<std::size_t>(group)])
        if (visible(rank) && (task.collective().only < 0 || task.collective().only == rank))
          tracks[{rank, kCommunication}].push_back({i, rank, group, ts, dur});
  }
  return tracks;
}

}  // namespace

nlohmann::json chrome_trace(const results::Result& r, int max_ranks) {
  const auto& g = r.replayed();
  const auto& t = r.timeline;
  // GPUs that run tasks (one per pipeline stage of the first replica), up to max_ranks of them.
  std::vector<int> shown;
  for (const auto& task : g.tasks)
    if (!task.is_collective && std::find(shown.begin(), shown.end(), task.rank) == shown.end() &&
        static_cast<int>(shown.size()) < max_ranks)
      shown.push_back(task.rank);
  auto visible = [&](int rank) { return std::find(shown.begin(), shown.end(), rank) != shown.end(); };

  auto tracks = tracks_of(g, t, visible);

  nlohmann::json events = nlohmann::json::array();
  const auto stands_for = copies_of(r, shown);
  for (std::size_t k = 0; k < shown.size(); ++k) {
    const int rank = shown[k];
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", rank}, {"args", {{"name", "rank " + std::to_string(rank)}}}});
    events.push_back({{"name", "process_labels"}, {"ph", "M"}, {"pid", rank}, {"args", {{"labels", stands_for[k]}}}});
  }
  std::map<std::pair<std::size_t, int>, Placed> placed;
  for (auto& [key, slices] : tracks) {
    const auto [rank, kind] = key;
    // Earliest first, the longer of two starting together first: each slice goes on the first
    // lane whose last slice has ended by its start.
    std::stable_sort(slices.begin(), slices.end(),
                     [](const Slice& a, const Slice& b) { return a.ts != b.ts ? a.ts < b.ts : a.dur > b.dur; });
    std::vector<double> lane_end;
    for (auto s : slices) {
      // Back-to-back tasks can overlap by a rounding error once in microseconds (ts + dur a few
      // ulps past the next ts): within a picosecond the slice starts where the lane's last ends.
      constexpr double kRounding = 1e-6;
      std::size_t lane = 0;
      while (lane < lane_end.size() && lane_end[lane] > s.ts + kRounding) ++lane;
      if (lane < lane_end.size() && lane_end[lane] > s.ts) {
        const double end = s.ts + s.dur;
        s.ts = lane_end[lane];
        s.dur = std::max(0.0, end - s.ts);
      }
      if (lane == lane_end.size()) {
        lane_end.push_back(0);
        const int tid = kind * 100 + static_cast<int>(lane);
        const std::string name = lane == 0 ? kKindNames[kind] : std::string(kKindNames[kind]) + " " + std::to_string(lane + 1);
        events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", rank}, {"tid", tid}, {"args", {{"name", name}}}});
        events.push_back({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", rank}, {"tid", tid}, {"args", {{"sort_index", tid}}}});
      }
      lane_end[lane] = s.ts + s.dur;
      placed[{s.task, rank}] = {kind * 100 + static_cast<int>(lane), s.ts, s.dur};
      const auto& task = g.tasks[s.task];
      events.push_back({{"name", task.label()},
                        {"cat", taskgraph::to_string(task.category)},
                        {"ph", "X"},
                        {"pid", rank},
                        {"tid", kind * 100 + static_cast<int>(lane)},
                        {"ts", s.ts},
                        {"dur", s.dur},
                        {"args", args_of(r, s)}});
    }
  }
  add_flows(g, placed, events);
  add_memory(r, shown, events);
  nlohmann::json drawn = nlohmann::json::object();
  for (std::size_t k = 0; k < shown.size(); ++k) drawn[std::to_string(shown[k])] = stands_for[k];
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}, {"otherData", {{"scenario", r.scenario_spec.name}, {"drawn_ranks", drawn}}}};
}

}  // namespace dtsim::reports
